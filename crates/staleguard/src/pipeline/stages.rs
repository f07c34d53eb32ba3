//! The stages every projection runs, one function each: how far results are read, whether
//! collapses may wait, where the frozen history ends, progress replayed, guidance added,
//! evidence chosen and written.
//! Both drivers in [`run`](super::run), from the first message and from a checkpoint, call
//! them in order.

use crate::adapter::WireRequest;
use crate::config::Config;
use crate::evidence::{self, EvidenceItem, EvidenceReport};
use crate::progress::{self, Progress, Tracker};
use crate::projection::{self, Plan};
use crate::reading::Depth;
use crate::session::Session;
use crate::transcript::Edit;

/// How far results are read: progress, evidence and the guard read trees, so then they
/// are read with the headers.
pub(crate) fn depth(config: &Config, verdicts: bool) -> Depth {
    if config.progress_on() || config.evidence_on() || verdicts {
        Depth::Full
    } else {
        Depth::Header
    }
}

/// Whether the MCP guard stands between the model and the browser, so that collapses may
/// wait (SPEC 9, C5): as the config says, else as the request's tools say.
pub(crate) fn guard_in_front(request: &WireRequest<'_>, config: &Config) -> bool {
    config
        .guard_in_front
        .unwrap_or(request.hints.offers.history)
}

/// The transcript item where the content that stays frozen from this request to the next
/// ends (SPEC 9, C1): the live page state or the newest browser result, whichever is first.
pub(crate) fn frozen_end(session: &Session<'_>, plan: &Plan) -> Option<usize> {
    let newest = session.steps.last().map(|s| s.item);
    let live = plan
        .results
        .iter()
        .filter(|r| r.status == projection::Status::Live)
        .map(|r| r.item)
        .min();
    newest.into_iter().chain(live).min()
}

/// Replays `session` into `tracker` from transcript item `from` on; with `snapshot`, also
/// gives the tracker as it was before item `snapshot`.
pub(crate) fn track(
    session: &Session<'_>,
    tracker: Tracker,
    from: usize,
    snapshot: Option<usize>,
) -> (Progress, Option<Tracker>) {
    let Some(cut) = snapshot else {
        let tracker = tracker.replay_items(session, from..usize::MAX, |_, _, _, _| {});
        return (tracker.into_progress(), None);
    };
    let tracker = tracker.replay_items(session, from..cut, |_, _, _, _| {});
    let kept = tracker.clone();
    let tracker = tracker.replay_items(session, cut..usize::MAX, |_, _, _, _| {});
    (tracker.into_progress(), Some(kept))
}

/// Appends the no-progress guidance to `target` ([`evidence::target`]) when the session is
/// stalled; true when it did.
pub(crate) fn add_guidance(progress: &Progress, target: usize, plan: &mut Plan) -> bool {
    let Some(step) = progress.last().filter(|s| s.stalled) else {
        return false;
    };
    plan.edits.push(Edit {
        item: target,
        text: progress::guidance(step).into(),
        append: true,
    });
    true
}

/// Writes every collapsed page's quotes inside it, and a question's answers after the newest
/// browser result before it (SPEC 9, C2 and C3). With `snapshot`, the choice is also kept as
/// it was after every event at or before transcript item `snapshot`.
pub(crate) fn add_written_evidence(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    config: &Config,
    snapshot: Option<usize>,
) -> (EvidenceReport, WrittenEvidence) {
    let (chosen, kept) = crate::evidence::choose_from(
        request.transcript(),
        session,
        plan,
        crate::evidence::Choice::new(limits(config)),
        None,
        snapshot,
    );
    // Under a budget the newest quotes go first, whole, until the request fits; the older
    // ones are in the provider's cache already.
    let mut keep = chosen.len();
    let (written, edits) = loop {
        let written = chosen.render(keep);
        let mut edits = plan.edits.clone();
        crate::evidence::apply(&written, &mut edits);
        let fits = config
            .request_budget_bytes
            .is_none_or(|budget| request.written_len(&edits) <= budget);
        if fits || keep == 0 {
            break (written, edits);
        }
        keep -= 1;
    };
    plan.edits = edits;
    let report = written_report(&written);
    (report, WrittenEvidence { written, kept })
}

/// The evidence a request carries, and the choice a checkpoint keeps.
pub(crate) struct WrittenEvidence {
    pub(crate) written: crate::evidence::Written,
    pub(crate) kept: Option<crate::evidence::Choice>,
}

/// The caps of the evidence track in `config`.
pub(crate) fn limits(config: &Config) -> evidence::Limits {
    evidence::Limits {
        max_bytes: config.evidence_max_bytes,
        max_items: config.evidence_max_items,
        max_quote_bytes: config.evidence_max_quote_bytes,
    }
}

/// What `written` reports: its quotes, refusals, omissions and bytes.
pub(crate) fn written_report(written: &crate::evidence::Written) -> EvidenceReport {
    let bytes = written
        .inside
        .iter()
        .chain(&written.appended)
        .map(|(_, t)| t.len())
        .sum();
    EvidenceReport {
        retained: written.quotes.clone(),
        refused: written.refused.clone(),
        omitted: written.omitted.clone(),
        bytes,
        ..EvidenceReport::default()
    }
}

/// Selects evidence, with the host's `explicit` items, and appends its block to `target`,
/// ([`evidence::target`]), within the request budget.
pub(crate) fn add_evidence(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    config: &Config,
    explicit: &[EvidenceItem],
    target: usize,
) -> EvidenceReport {
    let g = evidence::gather(session, plan);
    let selection = evidence::select(explicit, &g, limits(config));
    // Sizes only matter under a budget, and each costs a write of the request's edits.
    let sizes = std::cell::OnceCell::new();
    let fits = |block: &str| match config.request_budget_bytes {
        None => true,
        Some(budget) => {
            let &(base, body_len) =
                sizes.get_or_init(|| (request.written_len(&plan.edits), request.written_len(&[])));
            let appended = Edit {
                item: target,
                text: block.into(),
                append: true,
            };
            base + request.written_len(std::slice::from_ref(&appended)) - body_len <= budget
        }
    };
    let (block, report) = evidence::fit(selection, config.evidence_max_quote_bytes, fits);
    if let Some(text) = block {
        plan.edits.push(Edit {
            item: target,
            text: text.into(),
            append: true,
        });
    }
    report
}
