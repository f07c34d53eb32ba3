//! The two ways a projection runs, each a short driver over the shared [`stages`], as
//! ripgrep's searcher has one driver per way of reading: [`fresh`] reads the whole body
//! from its first message; [`resumed`] reads only the tail after the checkpoint an earlier
//! turn left ([`resume`]) and goes on from the state it kept, or gives up, and the caller
//! goes the whole way. Where the two differ (what is read, where the progress tracker and
//! the evidence choice begin, the breakpoint rule, how the body is written and the plan
//! reported), each driver does its own.

use std::sync::Arc;

use crate::adapter::{read_request, Breakpoint, RequestFormat, SplitWrite, WireRequest};
use crate::config::{Config, LivePage};
use crate::error::Error;
use crate::evidence::{self, EvidenceReport};
use crate::guard;
use crate::memo::Memo;
use crate::progress::{Progress, Tracker};
use crate::projection::{self, Plan, Status};
use crate::reading::Reader;
use crate::session::Session;
use crate::tools::BrowserTools;
use crate::waiting;

use super::checkpoint::Checkpoint;
use super::options::Options;
use super::output::{CallVerdict, Projection, Report};
use super::resume::{self, Analysed, Cut, CutFrom};
use super::stages::{self, WrittenEvidence};

/// A projection job: what a projection runs with: the config, its browser tools, the host's options, the memo
/// the session reads through, and the context a checkpoint for the next turn is kept under
/// (`None`: none is kept).
pub(crate) struct Job<'r> {
    pub(crate) config: &'r Config,
    pub(crate) tools: &'r BrowserTools,
    pub(crate) options: &'r Options<'r>,
    pub(crate) memo: &'r Memo,
    pub(crate) keep: Option<u64>,
}

/// What the analyses found, and what they leave for the writing and the checkpoint.
struct Analyses {
    progress: Option<Progress>,
    verdicts: Vec<CallVerdict>,
    /// The progress tracker before the cut's resume point.
    tracker: Option<Tracker>,
    /// The plan's edits hold the no-progress guidance.
    guidance: bool,
    written: Option<WrittenEvidence>,
    evidence: EvidenceReport,
}

impl Analyses {
    /// What they leave for the checkpoint of a request whose plan is `plan`.
    fn left<'p>(&'p mut self, plan: &'p Plan) -> Analysed<'p> {
        Analysed {
            report: plan,
            guidance: self.guidance,
            written: self.written.as_ref(),
            tracker: self.tracker.take(),
        }
    }
}

/// Projects `body`, read whole, from its first message.
pub(crate) fn fresh(body: &str, format: RequestFormat, job: &Job<'_>) -> Result<Projection, Error> {
    let (request, format, format_reason) = read_request(body, format)?;
    let session = session(&request, job);
    let waits = stages::guard_in_front(&request, job.config);
    let mut plan = plan(&request, &session, job.config, waits);
    let lean = job.config.live_page == LivePage::Lean;
    // Where a lean page reads a folded part back, of the ways the request offers.
    let find = lean && !waits && request.offers_find();
    // A later turn never resumes where collapses may wait (`resume::resumable`): no
    // checkpoint is kept for it.
    let known = CutFrom { find, base: None };
    let mut cut = (job.keep)
        .filter(|_| !waits)
        .and_then(|_| Cut::of(&request, &session, &plan, known));
    let mut found = fresh_analyses(&request, &session, &mut plan, cut.as_ref(), job);
    if lean {
        let options = lean_options(job.config, waits, find, (&[], None));
        make_lean(&request, &session, &mut plan, cut.as_mut(), options);
    }
    let breakpoint = breakpoint(&request, &session, &plan, format);
    let written = write(&request, &plan, breakpoint, cut.as_ref());
    if let (Some(cut), Some(context)) = (cut, job.keep) {
        resume::keep_whole(body, &written, cut, found.left(&plan), (job.memo, context));
    }
    Ok(Projection {
        body: written.body.into(),
        format,
        format_reason,
        report: Report::whole(plan),
        evidence: found.evidence,
        server_side_history: request.hints.server_side_history,
        progress: found.progress,
        verdicts: found.verdicts,
        breakpoint,
        resumed: false,
    })
}

/// Projects `tail`, the bytes of a body from checkpoint `base`'s resume point on, as a
/// whole read would project the body. `None` sends the request the whole way, when the
/// tail's answer would hang on something before the resume point that `base` does not keep:
/// - the tail cannot be read from there as a whole read reads it ([`resume::read_tail`]);
/// - [`resume::resumable`] says so, from the tail as read (most cases, decided early);
/// - Anthropic: the tail has no place for the breakpoint a whole read puts before its
///   frozen end;
/// - guidance is due and no result of the tail can carry it, or a cap drops a quote
///   written before the resume point ([`resumed_analyses`]).
pub(crate) fn resumed(
    tail: &str,
    format: RequestFormat,
    base: &Checkpoint,
    job: &Job<'_>,
) -> Option<Projection> {
    let request = resume::read_tail(tail, format, base)?;
    let mut session = session(&request, job);
    session.before = base.before.clone();
    if !resume::resumable(tail, &request, &session, base, job.config) {
        return None;
    }
    let mut plan = tail_plan(&session, base, job.config);
    let breakpoint = breakpoint(&request, &session, &plan, format);
    if format == RequestFormat::Anthropic && breakpoint.is_none() {
        return None;
    }
    let known = CutFrom {
        find: base.lean.find,
        base: Some(base),
    };
    let mut cut = job
        .keep
        .and_then(|_| Cut::of(&request, &session, &plan, known));
    let mut found = resumed_analyses(&request, &session, &mut plan, base, cut.as_ref(), job)?;
    if job.config.live_page == LivePage::Lean {
        let before = (&base.lean.users[..], base.lean.first);
        let options = lean_options(job.config, false, base.lean.find, before);
        make_lean(&request, &session, &mut plan, cut.as_mut(), options);
    }
    let parts = found.left(&plan);
    let (report, collapsed) = resume::merged_plan(base, &parts);
    let written = write(&request, &plan, breakpoint, cut.as_ref());
    if let (Some(cut), Some(context)) = (cut, job.keep) {
        resume::keep_tail(tail, base, &written, cut, parts, (job.memo, context));
    }
    Some(Projection {
        body: resume::after_base(base, written.body),
        format,
        format_reason: "given",
        report: Report::in_parts(report, collapsed),
        evidence: found.evidence,
        server_side_history: request.hints.server_side_history,
        progress: found.progress,
        verdicts: found.verdicts,
        breakpoint,
        resumed: true,
    })
}

/// The session of `request`, read through the job's memo as deep as its analyses need.
fn session<'t>(request: &'t WireRequest<'_>, job: &Job<'t>) -> Session<'t> {
    let reader = Reader {
        memo: job.memo,
        depth: stages::depth(job.config, job.options.verdicts),
    };
    Session::read(request.transcript(), job.tools, reader)
}

/// What collapses: every older observation at once, or, where collapses may wait, as the
/// turn-by-turn schedule says.
fn plan(request: &WireRequest<'_>, session: &Session<'_>, config: &Config, waits: bool) -> Plan {
    let max = config.receipt_max_bytes;
    if !waits {
        return projection::plan(session, max, false);
    }
    let schedule = waiting::schedule(request.transcript(), session, max);
    let mut plan = projection::plan_waiting(session, max, false, &schedule.collapsed_at);
    plan.batch = schedule.batch;
    plan
}

/// What collapses in a tail: every older observation at once (a tail never waits:
/// `resume::resumable`), without the stale notice when it was written before the resume
/// point, where anything collapsed.
fn tail_plan(session: &Session<'_>, base: &Checkpoint, config: &Config) -> Plan {
    let notice_written = base.results.iter().any(|r| r.status == Status::Collapsed);
    projection::plan(session, config.receipt_max_bytes, notice_written)
}

/// Progress, guidance and evidence, from the first message.
fn fresh_analyses(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    cut: Option<&Cut>,
    job: &Job<'_>,
) -> Analyses {
    let (progress, verdicts, tracker) = fresh_progress(session, job, cut.map(|c| c.resume.item));
    // Guidance and evidence ride on the newest non-failed browser result of the live state.
    let target = evidence::target(session, plan);
    let guidance = match (&progress, target) {
        (Some(progress), Some(target)) if job.config.progress_on() => {
            stages::add_guidance(progress, target, plan)
        }
        _ => false,
    };
    let (evidence, written) = fresh_evidence(request, session, plan, job, cut, target);
    Analyses {
        progress,
        verdicts,
        tracker,
        guidance,
        written,
        evidence,
    }
}

/// Progress, guidance and evidence, from where `base` left them; `None` when guidance is
/// due and no result of the tail can carry it, or when a cap drops a quote written before
/// the resume point ([`resume::choose`]).
fn resumed_analyses(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    base: &Checkpoint,
    cut: Option<&Cut>,
    job: &Job<'_>,
) -> Option<Analyses> {
    let (progress, tracker) = resumed_progress(session, base, cut.map(|c| c.resume.item));
    let guidance = match &progress {
        // Guidance rides on the newest result that did not fail: when none of the tail's
        // did, a whole read may find one before the resume point.
        Some(progress) => stages::add_guidance(progress, evidence::target(session, plan)?, plan),
        None => false,
    };
    let written = if job.config.evidence_on() {
        Some(resume::choose(request, session, plan, base, cut)?)
    } else {
        None
    };
    Some(Analyses {
        progress,
        verdicts: Vec::new(),
        tracker,
        guidance,
        evidence: resume::merged_evidence(base, written.as_ref()),
        written,
    })
}

/// Progress from the first message (counting only, unless verdicts are asked for: one full
/// replay gives both); with `snapshot`, also the counting tracker before transcript item
/// `snapshot`.
fn fresh_progress(
    session: &Session<'_>,
    job: &Job<'_>,
    snapshot: Option<usize>,
) -> (Option<Progress>, Vec<CallVerdict>, Option<Tracker>) {
    let config = job.config;
    if job.options.verdicts {
        let (progress, verdicts) = guard::verdicts(session, job.tools, config.max_repeats);
        // One verdict per browser call, in order.
        let verdicts = session
            .calls
            .iter()
            .zip(verdicts)
            .map(|(call, (_, verdict))| CallVerdict {
                item: call.item,
                message: call.message,
                tool: call.tool.to_string(),
                verdict,
            })
            .collect();
        return (Some(progress), verdicts, None);
    }
    if !config.progress_on() {
        return (None, Vec::new(), None);
    }
    let tracker = Tracker::counting(config.max_repeats);
    let (progress, snapshot) = stages::track(session, tracker, 0, snapshot);
    (Some(progress), Vec::new(), snapshot)
}

/// Progress from the tracker `base` kept (it kept one exactly when progress is tracked:
/// `resume::resumable`); with `snapshot`, also the tracker before transcript item
/// `snapshot`.
fn resumed_progress(
    session: &Session<'_>,
    base: &Checkpoint,
    snapshot: Option<usize>,
) -> (Option<Progress>, Option<Tracker>) {
    let Some(tracker) = base.tracker.clone() else {
        return (None, None);
    };
    let (progress, kept) = stages::track(session, tracker, base.resume.item, snapshot);
    (Some(progress), kept)
}

/// The evidence of a request read from its first message: the quotes of collapsed pages,
/// then the items the host named.
fn fresh_evidence(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    job: &Job<'_>,
    cut: Option<&Cut>,
    target: Option<usize>,
) -> (EvidenceReport, Option<WrittenEvidence>) {
    let config = job.config;
    let mut evidence = EvidenceReport::default();
    let mut written = None;
    if config.evidence_on() {
        let until = cut.map(|c| c.frozen);
        let (report, chosen) = stages::add_written_evidence(request, session, plan, config, until);
        evidence = report;
        written = Some(chosen);
    }
    let explicit = job.options.explicit;
    if let (false, true, Some(target)) = (explicit.is_empty(), config.evidence_on(), target) {
        let mut chosen = stages::add_evidence(request, session, plan, config, explicit, target);
        chosen.retained.splice(0..0, evidence.retained);
        chosen.bytes += evidence.bytes;
        evidence = chosen;
    }
    (evidence, written)
}

/// Makes the live page lean (SPEC 2), and tells `cut` what the next tail needs to know of
/// its first step to do the same.
fn make_lean(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    cut: Option<&mut Cut>,
    options: crate::lean::Options<'_>,
) {
    let transcript = request.transcript();
    if let Some(cut) = cut {
        let resume = cut.resume_item();
        cut.set_lean_first(crate::lean::first_from(
            transcript, session, options, resume,
        ));
    }
    crate::lean::add(transcript, session, plan, options);
}

/// How the live page is made lean (SPEC 2): where the guard stands in front (`guard`) a
/// folded part is read back through it, else through `browser_find` where the request
/// offers it (`find`); `before`, for a tail, the user's messages before it and what "ask
/// again" knows of its first step.
fn lean_options<'b>(
    config: &Config,
    guard: bool,
    find: bool,
    (users_before, first): (&'b [(usize, Arc<str>)], Option<crate::lean::First>),
) -> crate::lean::Options<'b> {
    crate::lean::Options {
        min_bytes: config.lean_min_bytes,
        guard,
        find,
        quote_bytes: config
            .evidence_on()
            .then_some(config.evidence_max_quote_bytes),
        users_before,
        first,
    }
}

/// Anthropic requests: our `cache_control` breakpoint at the end of what stays frozen, when
/// there is a place for one.
fn breakpoint(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &Plan,
    format: RequestFormat,
) -> Option<Breakpoint> {
    if format != RequestFormat::Anthropic {
        return None;
    }
    let end = stages::frozen_end(session, plan)?;
    request.breakpoint_before(end)
}

/// The request written with the plan's edits and our breakpoint, marked where `cut`
/// resumes reading.
fn write(
    request: &WireRequest<'_>,
    plan: &Plan,
    breakpoint: Option<Breakpoint>,
    cut: Option<&Cut>,
) -> SplitWrite {
    let mark = cut.map_or(0, |c| c.resume.offset);
    request.write_from("", 0, &plan.edits, breakpoint, mark)
}
