//! The next turn of a session, from a checkpoint (`checkpoint.rs`): the body's bytes
//! up to the checkpoint are those of a request projected before, so only the messages after
//! it are read, and the analyses resume from the state the checkpoint kept.
//!
//! A checkpoint is cut at the newest observation `o` of the frozen history (SPEC 9, C1):
//! - the evidence choice is kept after every event at or before `o` (a page's quotes are
//!   chosen when the next observation supersedes it, so every such event depends on the
//!   transcript up to `o` alone);
//! - reading resumes at the message of `o`'s call, so that `o` itself, whose quotes the next
//!   observation decides, is read again; the progress tracker is kept before that message;
//! - a page's quotes weigh what the model wrote from where it began reading the page, which
//!   may be before the resume point (results showing the same URL before it): the checkpoint
//!   keeps what those results showed and the model's words since, and the tail's transcript
//!   and session get them back (`evidence::read_before`);
//! - the bytes before `o`'s message must be the same (a hash), and the items of `o`'s
//!   message up to `o` too (a hash of what the analyses read of them).
//!
//! Whatever the new messages would change before the resume point makes the request go
//! the whole way: [`resumable`] lists what is seen from the tail as read, and
//! `run::resumed` the rest.

use std::sync::Arc;

use crate::adapter::{read_request_from, RequestFormat, ResumeAt, SplitWrite, WireRequest};
use crate::body::Body;
use crate::config::{Config, LivePage};
use crate::evidence::{Block, EvidenceReport, Quote, Written};
use crate::memo::Memo;
use crate::progress::Tracker;
use crate::projection::{self, Plan, ResultReport};
use crate::session::Session;
use crate::transcript::{Edit, Item, Role, Transcript};

use super::checkpoint::{self, Checkpoint, EditGroup, LeanBefore, Shared};
use super::stages::{frozen_end, guard_in_front, written_report, WrittenEvidence};
use crate::lean::MAX_RUN;

/// Where a request's checkpoint is cut.
pub(crate) struct Cut {
    /// Where reading resumes: the message of the call of `o`.
    pub(crate) resume: ResumeAt,
    /// `o`: the transcript item of the newest observation of the frozen history.
    pub(crate) frozen: usize,
    /// The start of `o`'s message: the bytes before it are hashed.
    hashed: ResumeAt,
    /// What the analyses read of the items of `o`'s message up to `o`.
    items: u128,
    /// What the results before `resume` showed, as far as where the model began reading a
    /// page goes (`evidence::read_before`), and what the model wrote and did from there up
    /// to `resume`: a page read from `resume` on weighs its quotes by those words too.
    before: Option<(Arc<str>, usize)>,
    model_before: Vec<(usize, Box<str>)>,
    /// What a lean live page after `resume` reads from before it.
    lean: LeanBefore,
}

/// What a cut knows besides the request: whether it offers `browser_find` (from a whole
/// read, or the checkpoint a tail was read from), and that checkpoint.
#[derive(Clone, Copy)]
pub(crate) struct CutFrom<'c> {
    pub(crate) find: bool,
    pub(crate) base: Option<&'c Checkpoint>,
}

impl Cut {
    /// Where reading resumes: the transcript item of the first message read again.
    pub(crate) fn resume_item(&self) -> usize {
        self.resume.item
    }

    /// What "ask again" knows of the first step read again (`lean::first_from`), for a lean
    /// page in the tail.
    pub(crate) fn set_lean_first(&mut self, first: Option<crate::lean::First>) {
        self.lean.first = first;
    }

    /// The cut of a request read as `request`, whose session and plan are given; `None`
    /// when it has no observation in its frozen history or cannot resume.
    pub(crate) fn of(
        request: &WireRequest<'_>,
        session: &Session<'_>,
        plan: &Plan,
        known: CutFrom<'_>,
    ) -> Option<Cut> {
        let end = frozen_end(session, plan)?;
        let o = session
            .steps
            .iter()
            .rev()
            .find(|s| s.item <= end && s.tree_kind().is_some())?;
        let transcript = request.transcript();
        let message_of = |item: usize| match transcript.items.get(item)? {
            Item::Call(call) => Some(call.message),
            Item::Result(result) => Some(result.message),
            _ => None,
        };
        let hashed = request.resume_at(message_of(o.item)?)?;
        let mut call = o.call_item;
        // Every step read again must find its call among the items read again.
        for _ in 0..4 {
            let resume = request.resume_at(message_of(call)?)?;
            let later = session
                .steps
                .iter()
                .rev()
                .take_while(|s| s.item >= resume.item);
            match later.map(|s| s.call_item).min() {
                Some(lowest) if lowest < resume.item => call = lowest,
                _ => {
                    let items = items_hash(transcript, hashed.item..o.item + 1);
                    let before = crate::evidence::read_before(session, resume.item);
                    let from = before.as_ref().map_or(resume.item, |(_, item)| *item);
                    let model_before = model_texts(transcript, from..resume.item);
                    let lean = lean_before(transcript, resume.item, known);
                    return Some(Cut {
                        resume,
                        frozen: o.item,
                        hashed,
                        items,
                        before,
                        model_before,
                        lean,
                    });
                }
            }
        }
        None
    }
}

/// What a lean live page after transcript item `resume` reads from before it, for the
/// checkpoint cut there: the user's messages (those before `known`'s base's resume point
/// come from it, as its tail does not hold them), the model's newest texts, and the
/// `browser_find` offer. What "ask again" knows of the first step is set by the run, which
/// knows how pages are made lean ([`Cut::set_lean_first`]).
fn lean_before(transcript: &Transcript<'_>, resume: usize, known: CutFrom<'_>) -> LeanBefore {
    let users = crate::lean::users_before(transcript, resume);
    let asked = users.last().map_or(0, |u| u.0);
    let model = model_texts(
        transcript,
        crate::lean::model_window(transcript, asked, resume)..resume,
    );
    let mut kept = known.base.map(|b| b.lean.users.clone()).unwrap_or_default();
    kept.extend(users);
    LeanBefore {
        users: kept,
        model,
        first: None,
        find: known.find,
    }
}

/// The model's texts and calls' arguments among `items` of `transcript` (what
/// `evidence::model_words` reads), after the first, with their items.
fn model_texts(
    transcript: &Transcript<'_>,
    items: std::ops::Range<usize>,
) -> Vec<(usize, Box<str>)> {
    let from = items.start + 1;
    let window = transcript
        .items
        .get(from..items.end.max(from))
        .unwrap_or_default();
    window
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            Item::Text {
                role: Role::Assistant,
                text,
            } => Some((from + i, Box::from(text.as_ref()))),
            Item::Call(call) => Some((from + i, Box::from(call.arguments.as_ref()))),
            _ => None,
        })
        .collect()
}

/// What the analyses read of `items` of `transcript`, hashed: every field of every item.
fn items_hash(transcript: &Transcript<'_>, items: std::ops::Range<usize>) -> u128 {
    let mut hash = xxhash_rust::xxh3::Xxh3::new();
    let mut field = |bytes: &[u8]| {
        hash.update(&(bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    };
    for item in transcript.items.get(items).unwrap_or_default() {
        match item {
            Item::Call(c) => {
                field(b"call");
                field(c.id.as_bytes());
                field(c.name.as_bytes());
                field(c.arguments.as_bytes());
                field(&c.message.to_le_bytes());
            }
            Item::Result(r) => {
                field(b"result");
                field(r.call_id.as_deref().unwrap_or("\u{0}none").as_bytes());
                field(r.text.as_bytes());
                let flags = [u8::from(r.is_error), u8::from(r.appendix)];
                field(&flags);
                field(&r.images.to_le_bytes());
                field(&r.message.to_le_bytes());
            }
            Item::Text { role, text } => {
                field(format!("text {role:?}").as_bytes());
                field(text.as_bytes());
            }
            Item::Other => field(b"other"),
        }
    }
    hash.digest128()
}

/// What a request's analyses left for its checkpoint.
pub(crate) struct Analysed<'p> {
    pub(crate) report: &'p Plan,
    /// The plan's edits hold the no-progress guidance.
    pub(crate) guidance: bool,
    pub(crate) written: Option<&'p WrittenEvidence>,
    /// The progress tracker before the cut's resume point.
    pub(crate) tracker: Option<Tracker>,
}

/// Keeps in `memo`, under `context`, the checkpoint at `cut` of `body`, read from its first
/// byte and written as `written`.
pub(crate) fn keep_whole(
    body: &str,
    written: &SplitWrite,
    cut: Cut,
    parts: Analysed<'_>,
    (memo, context): (&Memo, u64),
) {
    let end = cut.hashed.offset;
    let Some(hashed) = body.as_bytes().get(..end) else {
        return;
    };
    let hasher = checkpoint::hasher(memo.seed(), hashed);
    let bare = Checkpoint::bare(context, cut.resume.clone(), hashed, (hasher, end));
    keep(memo, bare, None, |bare| own_part(bare, written, cut, parts));
}

/// Keeps in `memo`, under `context`, the checkpoint at `cut` of `tail`, read from `base`'s
/// resume point on and written as `written`: `base`'s parts, then the tail's own.
pub(crate) fn keep_tail(
    tail: &str,
    base: &Checkpoint,
    written: &SplitWrite,
    cut: Cut,
    parts: Analysed<'_>,
    (memo, context): (&Memo, u64),
) {
    let (origin, end) = (base.resume.offset, cut.hashed.offset);
    // Only the bytes after `base`'s are hashed, on from its hash. A cut at `base`'s is `base`
    // (the request repeats its turn); one before it cannot be hashed without the bytes
    // before the tail: the next turn goes the whole way and keeps one.
    let after = (base.hashed.checked_sub(origin))
        .filter(|&from| from < end)
        .and_then(|from| tail.as_bytes().get(from..end));
    let Some(after) = after else {
        return;
    };
    let mut hasher = (*base.hasher).clone();
    hasher.update(after);
    let hashed = tail.as_bytes().get(..end).unwrap_or_default();
    let resume = cut.resume.clone().moved(origin);
    let bare = Checkpoint::bare(context, resume, hashed, (hasher, end + origin));
    let build = |bare| on_base(own_part(bare, written, cut, parts), base);
    keep(memo, bare, Some(base), build);
}

/// Keeps in `memo` the checkpoint that `build` makes of `bare`, in place of `replaces`,
/// unless one of the same bytes is kept already.
fn keep(
    memo: &Memo,
    bare: Checkpoint,
    replaces: Option<&Checkpoint>,
    build: impl FnOnce(Checkpoint) -> Checkpoint,
) {
    let checkpoints = checkpoint::kept_in(memo);
    if !checkpoints.has(&bare) {
        checkpoints.keep(build(bare), replaces);
    }
}

/// The body of a tail: `base`'s projected bytes (shared, not copied), then `tail`.
pub(crate) fn after_base(base: &Checkpoint, tail: String) -> Body {
    Body::resumed(base.written.parts().to_vec(), tail)
}

/// `kept`, a bare checkpoint of a run's bytes, with what the run keeps at `cut`: its bytes
/// before the resume point as written (`written`, without our breakpoint), the reports,
/// edits and evidence before it, the evidence choice and the progress tracker.
fn own_part(
    mut kept: Checkpoint,
    written: &SplitWrite,
    cut: Cut,
    parts: Analysed<'_>,
) -> Checkpoint {
    let mut own = written.body[..written.mark].to_string();
    if let Some(at) = written.breakpoint {
        own.replace_range(at..at + crate::adapter::BREAKPOINT.len(), "");
    }
    kept.written.push(&own);
    let resume_item = cut.resume.item;
    plan_before(&mut kept, &parts, resume_item);
    kept.items = cut.items;
    kept.hashed_item = cut.hashed.item;
    kept.chosen_until = cut.frozen;
    kept.tracker = parts.tracker;
    kept.before = cut.before;
    kept.model_before = cut.model_before;
    kept.lean = cut.lean;
    if let Some(w) = parts.written {
        (kept.quotes, kept.refused, kept.evidence_bytes) = evidence_before(&w.written, resume_item);
        kept.choice = w.kept.clone();
    }
    kept
}

/// Puts in `kept` the reports and edits of `parts`' plan before transcript item `item`, and
/// what they collapse.
fn plan_before(kept: &mut Checkpoint, parts: &Analysed<'_>, item: usize) {
    let report = parts.report;
    let before = |i: usize| i < item;
    let results = report.results.iter().filter(|r| before(r.item));
    kept.results.push(results.cloned().collect());
    kept.observations = report
        .results
        .iter()
        .any(|r| before(r.item) && is_observation(r));
    kept.collapsed = report
        .edits
        .iter()
        .filter(|e| !e.append && before(e.item))
        .count();
    let written = parts.written.map(|w| &w.written);
    let groups = edit_groups(&report.edits, parts.guidance, written);
    kept.edits.push(
        groups
            .into_iter()
            .zip(&report.edits)
            .filter(|(_, e)| before(e.item))
            .map(|(g, e)| (g, e.clone()))
            .collect(),
    );
}

/// `own`, a tail's checkpoint, after `base`'s parts: the checkpoint of the whole body.
fn on_base(mut own: Checkpoint, base: &Checkpoint) -> Checkpoint {
    own.written = base.written.clone().then(own.written);
    own.results = base.results.clone().then(own.results);
    own.edits = base.edits.clone().then(own.edits);
    own.observations |= base.observations;
    own.collapsed += base.collapsed;
    own.quotes.splice(0..0, base.quotes.iter().cloned());
    own.refused.splice(0..0, base.refused.iter().cloned());
    own.evidence_bytes += base.evidence_bytes;
    own
}

/// An observation that projection collapsed or kept live.
fn is_observation(r: &ResultReport) -> bool {
    matches!(
        r.status,
        projection::Status::Collapsed | projection::Status::Live
    )
}

/// The group of every edit of a plan whose edits are receipts, then the guidance (when
/// `guidance`), then what `written` appended ([`crate::evidence::apply`]'s order).
fn edit_groups(edits: &[Edit], guidance: bool, written: Option<&Written>) -> Vec<EditGroup> {
    let receipts = edits.iter().filter(|e| !e.append).count();
    let replaced: std::collections::HashSet<usize> =
        edits.iter().filter(|e| !e.append).map(|e| e.item).collect();
    let inside = written.map_or(0, |w| {
        w.inside
            .iter()
            .filter(|(i, _)| !replaced.contains(i))
            .count()
    });
    let guidance = usize::from(guidance);
    (0..edits.len())
        .map(|i| match i {
            i if i < receipts => EditGroup::Receipt,
            i if i < receipts + guidance => EditGroup::Guidance,
            i if i < receipts + guidance + inside => EditGroup::Inside,
            _ => EditGroup::Appended,
        })
        .collect()
}

/// Quotes with the block each is written in.
type BlockQuotes = Vec<(Block, Quote)>;

/// The quotes, refusals and bytes of the blocks of `written` before transcript item `item`.
fn evidence_before(written: &Written, item: usize) -> (BlockQuotes, BlockQuotes, usize) {
    let pick = |quotes: &[Quote], blocks: &[Block]| -> BlockQuotes {
        blocks
            .iter()
            .zip(quotes)
            .filter(|(b, _)| b.item() < item)
            .map(|(b, q)| (*b, q.clone()))
            .collect()
    };
    let bytes = written
        .inside
        .iter()
        .chain(&written.appended)
        .filter(|(i, _)| *i < item)
        .map(|(_, t)| t.len())
        .sum();
    (
        pick(&written.quotes, &written.quote_blocks),
        pick(&written.refused, &written.refused_blocks),
        bytes,
    )
}

/// The tail of a body from `base`'s resume point on, read as a whole read would read it
/// (`None` when it cannot be), with what the model wrote before the resume point given back:
/// it weighs the tail's quotes.
pub(crate) fn read_tail<'t>(
    tail: &'t str,
    format: RequestFormat,
    base: &Checkpoint,
) -> Option<WireRequest<'t>> {
    let mut request = read_request_from(tail, format, &base.resume.moved_to_start())?;
    for (item, text) in base.model_before.iter().chain(&base.lean.model) {
        request.restore_model_text(*item, text);
    }
    Some(request)
}

/// Whether a tail from `base`'s resume point on, read as `request` with `session`, can be
/// projected from `base` as a whole read would project the whole body. Each reason it
/// cannot is a line below: the answer would hang on something before the resume point that
/// `base` does not keep, so the request goes the whole way.
pub(crate) fn resumable(
    tail: &str,
    request: &WireRequest<'_>,
    session: &Session<'_>,
    base: &Checkpoint,
    config: &Config,
) -> bool {
    let transcript = request.transcript();
    let items = base.hashed_item..base.chosen_until + 1;
    // A lean page weighs its prose against what `base` kept of the transcript before the
    // tail, and "ask again" goes on from what `base` knew of the tail's first step, but
    // not past a run of MAX_RUN looks at one page (where the walk back stops would tell);
    // and `base` cannot see declarations of `browser_find` in a tail.
    (config.live_page != LivePage::Lean
        || (base.lean.first).is_some_and(|f| f.run_before + session.steps.len() < MAX_RUN)
            && !tail.contains(crate::tools::FIND_TOOL))
        // A waiting collapse rewrites what a checkpoint froze (SPEC 9, C5), and a tail that
        // names the history tool may belong to a request that offers it before the tail.
        && !guard_in_front(request, config)
        && !tail.contains(crate::tools::HISTORY_TOOL)
        // Progress and evidence go on from the tracker and the choice `base` kept, which it
        // kept when they are on.
        && base.tracker.is_some() == config.progress_on()
        && (base.choice.is_some() || !config.evidence_on())
        // The items of `base`'s message up to its observation read the same, the tail
        // has steps to go on from, and every result pairs with a call read again.
        && items_hash(transcript, items) == base.items
        && !session.steps.is_empty()
        && session.unpaired == 0
        // A file read back may have been linked by a page before the resume point.
        && !reads_back(session)
        // The live page state starts in the tail: else a page before it is live again.
        && live_after(session, base)
        // A new question is answered from every collapsed page, which `base` does not keep.
        && !asks_later(transcript, base, config)
}

/// True when the tail reads a snapshot file back through another tool: the page that
/// linked the file, and the stamps that order files, may be before the resume point, so
/// the request goes the whole way.
fn reads_back(session: &Session<'_>) -> bool {
    session.steps.iter().any(|s| s.by_content)
}

/// True when the live page state starts at or after the checkpoint's observation and is
/// found among the steps read again: otherwise a page before the resume point would be
/// live again.
fn live_after(session: &Session<'_>, base: &Checkpoint) -> bool {
    let steps = &session.steps;
    match projection::live_start(steps) {
        // A diff's walk back may end at the first step read only because the steps before
        // it were not read: a full tree must end it.
        Some(start) => {
            let kind = steps[start].tree_kind();
            let full = kind == Some(crate::observation::TreeKind::Full);
            let refines = matches!(
                kind,
                Some(crate::observation::TreeKind::Diff | crate::observation::TreeKind::Partial)
            );
            steps[start].item >= base.chosen_until && (full || !refines)
        }
        None => !base.observations,
    }
}

/// True when a user message after the checkpoint's observation may ask about collapsed
/// pages: its answer is chosen from every collapsed page, which the checkpoint does not
/// keep.
fn asks_later(transcript: &Transcript<'_>, base: &Checkpoint, config: &Config) -> bool {
    config.evidence_on()
        && transcript
            .items
            .iter()
            .skip(base.chosen_until + 1)
            .any(|i| {
                matches!(
                    i,
                    Item::Text {
                        role: Role::User,
                        ..
                    }
                )
            })
}

/// The evidence of the tail: the choice resumed from `base`, rendered from the resume point
/// on and written into `plan`; `None` when a cap dropped a quote written before it.
pub(crate) fn choose(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    base: &Checkpoint,
    cut: Option<&Cut>,
) -> Option<WrittenEvidence> {
    let mut choice = base.choice.clone()?;
    choice.state.lowest_drop = None;
    let (chosen, kept) = crate::evidence::choose_from(
        request.transcript(),
        session,
        plan,
        choice,
        Some(base.chosen_until),
        cut.map(|c| c.frozen),
    );
    if chosen.lowest_drop.is_some_and(|d| d < base.resume.item) {
        return None;
    }
    let written = chosen.render_from(chosen.len(), base.resume.item);
    crate::evidence::apply(&written, &mut plan.edits);
    Some(WrittenEvidence { written, kept })
}

/// The whole request's plan in parts: the checkpoint's results and edits, then the tail's.
#[derive(Debug)]
pub(crate) struct ReportParts {
    results: Shared<[ResultReport]>,
    edits: Shared<[(EditGroup, Edit)]>,
    tail: Plan,
    groups: Vec<EditGroup>,
}

impl ReportParts {
    /// The plan, in the order a whole projection lists it.
    pub(crate) fn join(&self) -> Plan {
        let mut results: Vec<ResultReport> = self.results.iter().cloned().collect();
        results.extend(self.tail.results.iter().cloned());
        let mut edits: Vec<(EditGroup, Edit)> = self.edits.iter().cloned().collect();
        edits.extend(
            self.groups
                .iter()
                .copied()
                .zip(self.tail.edits.iter().cloned()),
        );
        // Stable: within a group, the checkpoint's edits (earlier items) stay first.
        edits.sort_by_key(|(g, _)| *g);
        // A resumed request never waits (waiting requests go the whole way).
        Plan {
            results,
            edits: edits.into_iter().map(|(_, e)| e).collect(),
            ..Plan::default()
        }
    }
}

/// The whole request's plan, in parts, and how many observations it collapses, from what
/// the tail's analyses left.
pub(crate) fn merged_plan(base: &Checkpoint, parts: &Analysed<'_>) -> (ReportParts, usize) {
    let plan = parts.report;
    let written = parts.written.map(|w| &w.written);
    let groups = edit_groups(&plan.edits, parts.guidance, written);
    let collapsed = base.collapsed + plan.collapsed();
    let parts = ReportParts {
        results: base.results.clone(),
        edits: base.edits.clone(),
        tail: plan.clone(),
        groups,
    };
    (parts, collapsed)
}

/// The whole request's evidence report: the checkpoint's blocks and the tail's, inside
/// blocks before appended ones, each in transcript order.
pub(crate) fn merged_evidence(
    base: &Checkpoint,
    written: Option<&WrittenEvidence>,
) -> EvidenceReport {
    let Some(w) = written else {
        return EvidenceReport::default();
    };
    let tail = written_report(&w.written);
    let merge = |kept: &[(Block, Quote)], quotes: Vec<Quote>, blocks: &[Block]| {
        let mut all: Vec<(Block, Quote)> = kept.to_vec();
        all.extend(blocks.iter().copied().zip(quotes));
        all.sort_by_key(|(b, _)| matches!(b, Block::Appended(_)));
        all.into_iter().map(|(_, q)| q).collect::<Vec<_>>()
    };
    EvidenceReport {
        retained: merge(&base.quotes, tail.retained, &w.written.quote_blocks),
        refused: merge(&base.refused, tail.refused, &w.written.refused_blocks),
        omitted: tail.omitted,
        bytes: base.evidence_bytes + tail.bytes,
        ..EvidenceReport::default()
    }
}
