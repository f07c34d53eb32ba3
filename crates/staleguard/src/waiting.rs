//! Collapses that pay (SPEC 9, C5). A collapse rewrites, in the provider's prompt cache,
//! everything the previous request held after the collapsed observation. Where a coding
//! agent's file reads and shell output follow a page, collapsing it at once costs more than
//! sending it for the rest of the session; such a collapse waits, and waiting collapses are
//! done together, at one place, once what they save passes what they rewrite.
//!
//! The schedule is decided from the transcript alone: the request is replayed turn by turn
//! (each model message starts a turn; the request before it is the one that produced it),
//! and every turn decides from what its own request holds. An earlier request of the same
//! session is a prefix of this one, so it decided its turns alike (C1), and a collapse once
//! done stays done.
//!
//! Sizes are the neutral transcript's text bytes: results, call names and arguments,
//! message text. A receipt counts as `receipt_bytes`.

use crate::projection::live_start;
use crate::session::{Session, Step};
use crate::transcript::{Item, Role, Transcript};

/// Bytes of rewrite too few to wait for: the calls, page reports and file reads between a
/// browser agent's pages. Only a coding agent's output between pages is worth waiting for,
/// and a page left whole leaves its refs in sight.
const SMALL_REWRITE: usize = 4096;

/// When each browser result of a session collapses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Schedule {
    /// Per step: the transcript item at which the turn that collapsed it starts (the
    /// request's end for the newest turn); `None` while it is live or waits.
    pub(crate) collapsed_at: Vec<Option<usize>>,
    /// The first result that had waited and that the newest request collapses: the one
    /// place where this request's history differs from the previous request's.
    pub(crate) batch: Option<usize>,
}

/// Replays `transcript` turn by turn and decides, at each turn, which of the observations
/// that are no longer live collapse.
pub(crate) fn schedule(
    transcript: &Transcript<'_>,
    session: &Session<'_>,
    receipt_bytes: usize,
) -> Schedule {
    let steps = &session.steps;
    let sizes = Sizes::of(transcript);
    let saving: Vec<usize> = steps
        .iter()
        .map(|s| s.text.len().saturating_sub(receipt_bytes))
        .collect();
    let mut schedule = Schedule {
        collapsed_at: vec![None; steps.len()],
        batch: None,
    };
    let mut due_since = vec![None; steps.len()];
    let mut previous = 0;
    let end = transcript.items.len();
    for turn in turn_starts(transcript).chain(std::iter::once(end)) {
        let seen = steps.partition_point(|s| s.item < turn);
        let pending = pending(&steps[..seen], &schedule.collapsed_at);
        for &i in &pending {
            due_since[i].get_or_insert(turn);
        }
        let turn_cost = TurnCost {
            steps,
            sizes: &sizes,
            saving: &saving,
            collapsed: &schedule.collapsed_at,
            previous,
        };
        if let Some(first) = turn_cost.first_that_pays(&pending) {
            for &i in &pending[first..] {
                schedule.collapsed_at[i] = Some(turn);
            }
            let waited = pending[first..]
                .iter()
                .find(|&&i| due_since[i].is_some_and(|since| since < turn));
            if turn == end {
                schedule.batch = waited.map(|&i| steps[i].item);
            }
        }
        previous = turn;
    }
    schedule
}

/// The steps among `steps` (a request's) that are no longer live and have not collapsed.
fn pending(steps: &[Step<'_>], collapsed_at: &[Option<usize>]) -> Vec<usize> {
    let live = live_start(steps);
    (0..steps.len())
        .filter(|&i| collapsed_at[i].is_none() && steps[i].tree_kind().is_some())
        .filter(|&i| steps[i].outdated || live.is_some_and(|start| i < start))
        .collect()
}

/// What collapsing costs and saves at one turn.
struct TurnCost<'a, 't> {
    steps: &'a [Step<'t>],
    sizes: &'a Sizes,
    saving: &'a [usize],
    collapsed: &'a [Option<usize>],
    /// Where the previous turn's request ended: what follows is new and written anyway.
    previous: usize,
}

impl TurnCost<'_, '_> {
    /// The first of `pending` from which collapsing them all pays: the bytes they save are
    /// at least the bytes the previous request held after the first of them, which the
    /// collapse makes the provider write again, or those are few. `None`: they all wait.
    fn first_that_pays(&self, pending: &[usize]) -> Option<usize> {
        let mut saved: usize = pending.iter().map(|&i| self.saving[i]).sum();
        for (j, &i) in pending.iter().enumerate() {
            let rewritten = self.rewritten(i, &pending[j + 1..]);
            if rewritten <= SMALL_REWRITE || saved >= rewritten {
                return Some(j);
            }
            saved -= self.saving[i];
        }
        None
    }

    /// Bytes of the previous request after step `first`, as they read once `first` and
    /// `with` collapse too.
    fn rewritten(&self, first: usize, with: &[usize]) -> usize {
        let from = self.steps[first].item + 1;
        if from >= self.previous {
            return 0;
        }
        let within = |i: &usize| (from..self.previous).contains(&self.steps[*i].item);
        let collapsed = (0..self.steps.len()).filter(|&i| self.collapsed[i].is_some());
        let receipts: usize = collapsed
            .chain(with.iter().copied())
            .filter(within)
            .map(|i| self.saving[i])
            .sum();
        self.sizes
            .between(from, self.previous)
            .saturating_sub(receipts)
    }
}

/// Where each model turn starts: the first item of the model's own (a call, or its text)
/// after an item that is not.
fn turn_starts<'a>(transcript: &'a Transcript<'_>) -> impl Iterator<Item = usize> + 'a {
    let items = &transcript.items;
    (1..items.len()).filter(move |&i| by_model(&items[i]) && !by_model(&items[i - 1]))
}

fn by_model(item: &Item<'_>) -> bool {
    matches!(
        item,
        Item::Call(_)
            | Item::Text {
                role: Role::Assistant,
                ..
            }
    )
}

/// Running totals of the items' text bytes.
struct Sizes {
    before: Vec<usize>,
}

impl Sizes {
    fn of(transcript: &Transcript<'_>) -> Sizes {
        let mut before = Vec::with_capacity(transcript.items.len() + 1);
        let mut total = 0;
        before.push(0);
        for item in &transcript.items {
            total += match item {
                Item::Call(call) => call.name.len() + call.arguments.len(),
                Item::Result(result) => result.text.len(),
                Item::Text { text, .. } => text.len(),
                Item::Other => 0,
            };
            before.push(total);
        }
        Sizes { before }
    }

    /// Bytes of the items from `from` up to (not including) `to`.
    fn between(&self, from: usize, to: usize) -> usize {
        let at = |i: usize| self.before.get(i).copied().unwrap_or(0);
        at(to).saturating_sub(at(from))
    }
}
