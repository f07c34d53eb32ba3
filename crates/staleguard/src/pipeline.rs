//! The pipeline: read -> observe -> analyse -> render -> write.
//!
//! The wire adapter reads the body into a neutral transcript; [`Session::build`] reads every
//! browser result once; projection, progress, evidence and (on demand) the guard read the
//! session; their edits go back through the adapter. Each part of a result is computed at
//! most once, and with a [`Memo`] not again in the next request.

use crate::adapter::{read_request, Breakpoint, RequestFormat, WireRequest};
use crate::body::Body;
use crate::checkpoint::Parts;
use crate::config::Config;
use crate::error::Error;
use crate::evidence::{self, EvidenceItem, EvidenceReport};
use crate::guard::{self, Verdict};
use crate::memo::Memo;
use crate::progress::{self, Progress, Tracker};
use crate::projection::{self, Edit, Plan};
use crate::session::{Depth, Session};
use crate::tools::BrowserTools;

mod resume;

use std::sync::Arc;

/// What a projection may use beyond the request and the config.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Evidence items named by the host. Each must ground in a chunk the browser returned
    /// (SPEC 3); the rest are dropped and reported.
    pub explicit: &'a [EvidenceItem],
    /// Readings kept from earlier requests.
    pub memo: Option<&'a Memo>,
    /// Also give the guard's verdict on every browser call (`inspect`).
    pub verdicts: bool,
}

/// A projected request, with everything the analyses found.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The body to send to the model.
    pub body: Body,
    /// The format that was read.
    pub format: RequestFormat,
    /// Why that format was chosen (for `inspect`).
    pub format_reason: &'static str,
    /// What happened to every browser result: see [`report`](Self::report).
    report: Report,
    /// What the evidence track kept, refused, omitted and dropped.
    pub evidence: EvidenceReport,
    /// Earlier turns live on the server (Responses `previous_response_id` / `conversation`,
    /// Gemini `cachedContent`): only what the request holds was projected.
    pub server_side_history: bool,
    /// Page fingerprints and no-progress counts, one step per browser result, when progress
    /// is tracked or verdicts were asked for.
    pub progress: Option<Progress>,
    /// The guard's verdict on every browser call, against the transcript before it, when
    /// asked for.
    pub verdicts: Vec<CallVerdict>,
    /// Anthropic requests: the `cache_control` breakpoint of our own at the end of what
    /// stays frozen (SPEC 9), or why there is none. `None` for other formats and requests
    /// without a browser result.
    pub breakpoint: Option<Breakpoint>,
    /// Read and analysed from a checkpoint in the memo on: only the messages from the
    /// previous turn's newest observation on were read. The answer is the same either way.
    pub resumed: bool,
}

/// A projection's plan, or the parts it is made of when the request resumed from a
/// checkpoint: joined on first use, as most hosts (the proxy) never read it whole.
#[derive(Debug, Clone)]
struct Report {
    plan: std::sync::OnceLock<Plan>,
    parts: Option<Arc<resume::ReportParts>>,
    collapsed: usize,
}

impl Report {
    fn whole(plan: Plan) -> Report {
        Report {
            collapsed: plan.collapsed(),
            plan: std::sync::OnceLock::from(plan),
            parts: None,
        }
    }
}

impl Projection {
    /// What happened to every browser result: a report per result, and the edits.
    pub fn report(&self) -> &Plan {
        let report = &self.report;
        report.plan.get_or_init(|| {
            report
                .parts
                .as_ref()
                .map_or_else(Plan::default, |p| p.join())
        })
    }

    /// How many observations collapsed: [`Plan::collapsed`] of the
    /// [`report`](Self::report), without joining it.
    pub fn collapsed(&self) -> usize {
        self.report.collapsed
    }
}

/// The guard's verdict on one browser call of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallVerdict {
    /// Index of the call in the transcript.
    pub item: usize,
    /// Index of the message (or item) that carries it.
    pub message: usize,
    /// The tool the call names, as the request spells it (MCP prefix included).
    pub tool: String,
    /// Whether the guard would let the call through, and if not, why.
    pub verdict: Verdict,
}

/// The name the library used before the pipeline had its own module.
pub type Projected = Projection;

/// Projects `body` under `config`: the call itself is the opt-in, whatever
/// `browser_history_compaction` says (that switch is for hosts, which read it first).
pub fn project_request(
    body: &str,
    format: RequestFormat,
    config: &Config,
) -> Result<Projection, Error> {
    project(body, format, config, Options::default())
}

/// [`project_request`], with evidence items named by the host.
pub fn project_request_with(
    body: &str,
    format: RequestFormat,
    config: &Config,
    explicit: &[EvidenceItem],
) -> Result<Projection, Error> {
    let options = Options {
        explicit,
        ..Options::default()
    };
    project(body, format, config, options)
}

/// Projects `body` under `config`, with `options`.
pub fn project(
    body: &str,
    format: RequestFormat,
    config: &Config,
    options: Options<'_>,
) -> Result<Projection, Error> {
    if let Some(p) = project_resumed(body, format, config, &options) {
        return Ok(p);
    }
    let checkpoints = checkpointing(format, config, &options);
    project_whole(body, format, config, options, checkpoints)
}

/// [`project`], only when `body` is the next turn of a session that `options.memo` has
/// seen: it resumes from the checkpoint of the earlier turn, and costs a small share of a
/// whole projection (about a millisecond for a megabyte). `None` otherwise, after little
/// work (hashing the part of `body` a kept checkpoint covers). A host can run this where
/// the request arrived and give only the rest, [`project`], a thread of its own. The
/// projection is the one [`project`] returns.
pub fn project_resumed(
    body: &str,
    format: RequestFormat,
    config: &Config,
    options: &Options<'_>,
) -> Option<Projection> {
    let (memo, context) = checkpointing(format, config, options)?;
    let parts = [body.as_bytes()];
    let found = memo
        .checkpoints
        .find(&Parts::new(&parts), context, memo.seed())?;
    let tail = body.get(found.resume.offset..)?;
    let projected = resume::project_tail(tail, format, config, memo, &found)?;
    memo.count_resumed();
    Some(projected)
}

/// [`project_resumed`], for a body given as its byte parts in order (a request's frames as
/// they arrived), without joining them: only the bytes after the checkpoint's resume point
/// are copied and read as text, the rest only hashed. `None` also when those bytes are not
/// UTF-8; [`project`] of the joined body then says why.
pub fn project_resumed_parts(
    parts: &[&[u8]],
    format: RequestFormat,
    config: &Config,
    options: &Options<'_>,
) -> Option<Projection> {
    let (memo, context) = checkpointing(format, config, options)?;
    let body = Parts::new(parts);
    let found = memo.checkpoints.find(&body, context, memo.seed())?;
    let from = found.resume.offset;
    let mut tail = Vec::with_capacity(body.len().saturating_sub(from));
    body.slices(from..body.len())
        .for_each(|s| tail.extend_from_slice(s));
    let tail = String::from_utf8(tail).ok()?;
    let projected = resume::project_tail(&tail, format, config, memo, &found)?;
    memo.count_resumed();
    Some(projected)
}

/// The memo that keeps checkpoints for this request, and the context they are kept under:
/// only for the formats that resume, and for answers that depend on nothing a checkpoint
/// does not keep (host evidence, the guard's verdicts, a request budget that weighs the
/// whole request).
fn checkpointing<'m>(
    format: RequestFormat,
    config: &Config,
    options: &Options<'m>,
) -> Option<(&'m Memo, u64)> {
    let resumes = matches!(format, RequestFormat::OpenAiChat | RequestFormat::Anthropic);
    let whole = !options.explicit.is_empty() || options.verdicts;
    if !resumes || whole || config.request_budget_bytes.is_some() {
        return None;
    }
    let memo = options.memo?;
    Some((memo, crate::checkpoint::context_of(format, config)))
}

/// [`project`] from the first message on; with `checkpoints`, a checkpoint for the next
/// request is kept.
fn project_whole(
    body: &str,
    format: RequestFormat,
    config: &Config,
    options: Options<'_>,
    checkpoints: Option<(&Memo, u64)>,
) -> Result<Projection, Error> {
    let (request, format, format_reason) = read_request(body, format)?;
    let tools = BrowserTools::new(&config.browser_tools);
    let session = Session::read(
        request.transcript(),
        &tools,
        options.memo,
        depth(config, options.verdicts),
    );
    let mut report = projection::plan(&session, config.receipt_max_bytes);
    let cut = checkpoints.and_then(|_| resume::Cut::of(&request, &session, &report));
    let snapshots = cut.as_ref().map(|c| (c.resume.item, c.frozen));
    let (progress, verdicts, tracker) = analyse_progress(
        &session,
        &tools,
        config,
        options.verdicts,
        snapshots.map(|s| s.0),
    );
    // Guidance and evidence ride on the newest non-failed browser result of the live state.
    let target = evidence::target(&session, &report);
    let mut guidance = false;
    if let (true, Some(progress), Some(target)) = (config.progress_on(), &progress, target) {
        guidance = add_guidance(progress, target, &mut report);
    }
    let mut evidence = EvidenceReport::default();
    let mut written = None;
    if config.evidence_on() {
        let until = snapshots.map(|s| s.1);
        let (report_of, chosen) =
            add_written_evidence(&request, &session, &mut report, config, options.memo, until);
        evidence = report_of;
        written = Some(chosen);
    }
    if let (false, true, Some(target)) = (options.explicit.is_empty(), config.evidence_on(), target)
    {
        let explicit = options.explicit;
        let mut chosen = add_evidence(&request, &session, &mut report, config, explicit, target);
        chosen.retained.splice(0..0, evidence.retained);
        chosen.bytes += evidence.bytes;
        evidence = chosen;
    }
    let breakpoint = match format {
        RequestFormat::Anthropic => {
            frozen_end(&session, &report).and_then(|item| request.breakpoint_before(item))
        }
        _ => None,
    };
    let body_out = match (cut, checkpoints) {
        (Some(cut), Some((memo, context))) => {
            let parts = resume::Analysed {
                report: &report,
                guidance,
                written: written.as_ref(),
                tracker,
            };
            resume::write_and_keep(
                (body, 0),
                &request,
                breakpoint,
                None,
                cut,
                parts,
                memo,
                context,
            )
        }
        _ => request.write_with(&report.edits, breakpoint).into(),
    };
    Ok(Projection {
        body: body_out,
        format,
        format_reason,
        report: Report::whole(report),
        evidence,
        server_side_history: request.hints.server_side_history,
        progress,
        verdicts,
        breakpoint,
        resumed: false,
    })
}

/// How far results are read: progress, evidence and the guard read trees, so then they
/// are read with the headers.
fn depth(config: &Config, verdicts: bool) -> Depth {
    if config.progress_on() || config.evidence_on() || verdicts {
        Depth::Full
    } else {
        Depth::Header
    }
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

/// Progress (counting only, unless verdicts are asked for: one full replay gives both);
/// with `snapshot`, also the counting tracker before transcript item `snapshot`.
fn analyse_progress(
    session: &Session<'_>,
    tools: &BrowserTools,
    config: &Config,
    with_verdicts: bool,
    snapshot: Option<usize>,
) -> (Option<Progress>, Vec<CallVerdict>, Option<Tracker>) {
    if with_verdicts {
        let (progress, verdicts) = guard::verdicts_in(session, tools, config.max_repeats);
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
    let (progress, snapshot) = track(session, tracker, 0, snapshot);
    (Some(progress), Vec::new(), snapshot)
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
fn add_written_evidence(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    config: &Config,
    memo: Option<&Memo>,
    snapshot: Option<usize>,
) -> (EvidenceReport, WrittenEvidence) {
    let (chosen, kept) = crate::written::choose_from(
        request.transcript(),
        session,
        plan,
        crate::written::Choice::new(limits(config)),
        None,
        snapshot,
        memo,
    );
    // Under a budget the newest quotes go first, whole, until the request fits; the older
    // ones are in the provider's cache already.
    let mut keep = chosen.len();
    let (written, edits) = loop {
        let written = chosen.render(keep);
        let mut edits = plan.edits.clone();
        crate::written::apply(&written, &mut edits);
        let fits = config
            .request_budget_bytes
            .map_or(true, |budget| request.written_len(&edits) <= budget);
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
    pub(crate) written: crate::written::Written,
    pub(crate) kept: Option<crate::written::Choice>,
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
pub(crate) fn written_report(written: &crate::written::Written) -> EvidenceReport {
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
fn add_evidence(
    request: &WireRequest<'_>,
    session: &Session<'_>,
    plan: &mut Plan,
    config: &Config,
    explicit: &[EvidenceItem],
    target: usize,
) -> EvidenceReport {
    let g = evidence::gather(session, plan);
    let limits = evidence::Limits {
        max_bytes: config.evidence_max_bytes,
        max_items: config.evidence_max_items,
        max_quote_bytes: config.evidence_max_quote_bytes,
    };
    let selection = evidence::select(explicit, &g, limits);
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
