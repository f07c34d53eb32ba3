//! The one stage sequence: read -> observe -> analyse -> render -> write, from the first
//! message or from a checkpoint an earlier turn left ([`Start`]). Both starts run the same
//! stages; where they differ (what is read, where the progress tracker and the evidence
//! choice begin, how the plan is reported), the stage asks its `start`.

use std::sync::Arc;

use crate::adapter::{read_request, read_request_from, Breakpoint, RequestFormat, WireRequest};
use crate::body::Body;
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
use super::resume::{self, Analysed, Cut};
use super::stages::{self, WrittenEvidence};

/// Where a projection starts.
#[derive(Clone, Copy)]
pub(crate) enum Start<'c> {
    /// From the first message: the body is whole.
    Fresh,
    /// From a checkpoint: the body is given from the checkpoint's resume point on, and
    /// nothing before it is read.
    From(&'c Arc<Checkpoint>),
}

impl<'c> Start<'c> {
    fn base(self) -> Option<&'c Checkpoint> {
        match self {
            Start::Fresh => None,
            Start::From(base) => Some(base),
        }
    }
}

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

/// Projects `body` from `start`. `Ok(None)` only from a checkpoint, when the tail cannot be
/// projected as a whole read would project it: the caller then goes the whole way.
pub(crate) fn project(
    body: &str,
    format: RequestFormat,
    start: Start<'_>,
    job: &Job<'_>,
) -> Result<Option<Projection>, Error> {
    let Some((request, format, format_reason)) = read(body, format, start)? else {
        return Ok(None);
    };
    let reader = Reader {
        memo: job.memo,
        depth: stages::depth(job.config, job.options.verdicts),
    };
    let mut session = Session::read(request.transcript(), job.tools, reader);
    session.before = start.base().and_then(|base| base.before.clone());
    // A resumed run's notice was written before the resume point if anything collapsed there.
    let notice_written = start
        .base()
        .is_some_and(|base| base.results.iter().any(|r| r.status == Status::Collapsed));
    let waits = stages::guard_in_front(&request, job.config);
    // A waiting collapse rewrites what a checkpoint froze, and a tail that names the history
    // tool may belong to a request that offers it before the tail: a whole read decides.
    let named = || body.contains(crate::tools::HISTORY_TOOL);
    // A lean page weighs its prose against the user's words before it, which a tail lacks.
    let lean = job.config.live_page == LivePage::Lean;
    if start.base().is_some() && (waits || lean || named()) {
        return Ok(None);
    }
    let mut plan = plan(&request, &session, job.config, notice_written, waits);
    if let Some(base) = start.base() {
        if !resume::continues(&request, &session, base, job.config) {
            return Ok(None);
        }
    }
    let cut = job
        .keep
        .filter(|_| !waits && !lean)
        .and_then(|_| Cut::of(&request, &session, &plan));
    let Some(mut found) = analyse(&request, &session, &mut plan, start, cut.as_ref(), job) else {
        return Ok(None);
    };
    if lean {
        let config = job.config;
        let options = crate::lean::Options {
            min_bytes: config.lean_min_bytes,
            guard: waits,
            find: request.hints.offers.find,
            quote_bytes: config
                .evidence_on()
                .then_some(config.evidence_max_quote_bytes),
        };
        crate::lean::add(request.transcript(), &session, &mut plan, options);
    }
    let Some(breakpoint) = breakpoint(&request, &session, &plan, format, start) else {
        return Ok(None);
    };
    let (guidance, written) = (found.guidance, found.written.as_ref());
    let report = start
        .base()
        .map(|base| resume::merged_plan(base, &plan, guidance, written));
    let parts = Analysed {
        report: &plan,
        guidance,
        written,
        tracker: found.tracker.take(),
    };
    let body = write(body, &request, breakpoint, cut, parts, start, job);
    let report = match report {
        None => Report::whole(plan),
        Some((parts, collapsed)) => Report::in_parts(parts, collapsed),
    };
    Ok(Some(Projection {
        body,
        format,
        format_reason,
        report,
        evidence: found.evidence,
        server_side_history: request.hints.server_side_history,
        progress: found.progress,
        verdicts: found.verdicts,
        breakpoint,
        resumed: start.base().is_some(),
    }))
}

/// What collapses: every older observation at once, or, where collapses may wait, as the
/// turn-by-turn schedule says.
fn plan(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    config: &Config,
    notice_written: bool,
    waits: bool,
) -> Plan {
    let max = config.receipt_max_bytes;
    if !waits {
        return projection::plan(session, max, notice_written);
    }
    let schedule = waiting::schedule(request.transcript(), session, max);
    let mut plan = projection::plan_waiting(session, max, notice_written, &schedule.collapsed_at);
    plan.batch = schedule.batch;
    plan
}

/// The request, the format it was read as and why; `None` when a tail cannot be read as a
/// whole read would read it.
fn read<'b>(
    body: &'b str,
    format: RequestFormat,
    start: Start<'_>,
) -> Result<Option<(WireRequest<'b>, RequestFormat, &'static str)>, Error> {
    match start {
        Start::Fresh => read_request(body, format).map(Some),
        Start::From(base) => {
            let request = read_request_from(body, format, &base.resume.moved_to_start());
            Ok(request.map(|mut r| {
                // What the model wrote before the resume point weighs the tail's quotes.
                for (item, text) in &base.model_before {
                    r.restore_model_text(*item, text);
                }
                (r, format, "given")
            }))
        }
    }
}

/// Progress, guidance and evidence; `None` when a tail's analyses cannot go on from where
/// its checkpoint left them.
fn analyse(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    start: Start<'_>,
    cut: Option<&Cut>,
    job: &Job<'_>,
) -> Option<Analyses> {
    let config = job.config;
    let snapshot = cut.map(|c| c.resume.item);
    let (progress, verdicts, tracker) = match start.base() {
        None => fresh_progress(session, job, snapshot),
        Some(base) => {
            let (progress, tracker) = resumed_progress(session, base, config, snapshot)?;
            (progress, Vec::new(), tracker)
        }
    };
    // Guidance and evidence ride on the newest non-failed browser result of the live state.
    let target = evidence::target(session, plan);
    let mut guidance = false;
    if let (true, Some(progress)) = (config.progress_on(), &progress) {
        match target {
            Some(target) => guidance = stages::add_guidance(progress, target, plan),
            None if start.base().is_some() => return None,
            None => {}
        }
    }
    let (evidence, written) = match start.base() {
        None => fresh_evidence(request, session, plan, job, cut, target),
        Some(_) if !config.evidence_on() => (EvidenceReport::default(), None),
        Some(base) => {
            let written = resume::choose(request, session, plan, base, cut)?;
            (resume::merged_evidence(base, Some(&written)), Some(written))
        }
    };
    Some(Analyses {
        progress,
        verdicts,
        tracker,
        guidance,
        written,
        evidence,
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

/// Progress from the tracker a checkpoint kept; `None` when it kept none and progress is
/// on, or one and progress is off.
fn resumed_progress(
    session: &Session<'_>,
    base: &Checkpoint,
    config: &Config,
    snapshot: Option<usize>,
) -> Option<(Option<Progress>, Option<Tracker>)> {
    let tracker = match (&base.tracker, config.progress_on()) {
        (Some(t), true) => t.clone(),
        (None, false) => return Some((None, None)),
        _ => return None,
    };
    let (progress, kept) = stages::track(session, tracker, base.resume.item, snapshot);
    Some((Some(progress), kept))
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

/// Anthropic requests: our `cache_control` breakpoint at the end of what stays frozen.
/// `None` when a tail has no place for the one a whole read would give it.
fn breakpoint(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &Plan,
    format: RequestFormat,
    start: Start<'_>,
) -> Option<Option<Breakpoint>> {
    if format != RequestFormat::Anthropic {
        return Some(None);
    }
    let end = stages::frozen_end(session, plan);
    match start {
        Start::Fresh => Some(end.and_then(|item| request.breakpoint_before(item))),
        Start::From(_) => Some(Some(request.breakpoint_before(end?)?)),
    }
}

/// The body to send: the request written with the plan's edits (after the checkpoint's
/// bytes, from one), and a checkpoint kept at `cut` when one is kept.
fn write(
    body: &str,
    request: &WireRequest<'_>,
    breakpoint: Option<Breakpoint>,
    cut: Option<Cut>,
    parts: Analysed<'_>,
    start: Start<'_>,
    job: &Job<'_>,
) -> Body {
    let base = start.base();
    match (cut, job.keep) {
        (Some(cut), Some(context)) => {
            let source = resume::Source {
                body,
                origin: base.map_or(0, |b| b.resume.offset),
                request,
                breakpoint,
                base,
            };
            resume::write_and_keep(source, cut, parts, (job.memo, context))
        }
        _ => {
            let edits = &parts.report.edits;
            match base {
                None => request.write_with(edits, breakpoint).into(),
                Some(base) => {
                    let tail = request.write_from("", 0, edits, breakpoint, 0);
                    resume::after_base(Some(base), tail.body)
                }
            }
        }
    }
}
