//! Projection (SPEC 2): every browser observation but the newest collapses to a receipt.
//!
//! [`plan`] reads the [`Session`] and decides, for every browser result, what it
//! is and whether it collapses. It returns the edits; adapters write them into the body.
//!
//! Most callers read its results through [`Projection::report`](crate::Projection::report)
//! ([`Plan`], [`ResultReport`], [`Status`], re-exported at the crate root). [`plan`] and
//! [`Edit`] are public for hosts that run the stages themselves: the CLI's `replay`
//! projects a session step by step.

use std::sync::Arc;

use crate::observation::TreeKind;
use crate::session::{Session, Step};

/// What a browser result is, after projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Part of the newest page state: kept as it is.
    Live,
    /// An older observation, replaced by its receipt.
    Collapsed,
    /// A failure: never collapsed.
    Failed,
    /// Names a page but carries no tree: kept.
    PageReport,
    /// A browser result that is neither an observation nor a page report: kept.
    Other,
}

impl Status {
    /// The status as reports print it: `live`, `collapsed`, `failed`, `page report`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Live => "live",
            Status::Collapsed => "collapsed",
            Status::Failed => "failed",
            Status::PageReport => "page report",
            Status::Other => "other",
        }
    }
}

/// One browser result and what projection did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultReport {
    /// Index of the item in the transcript.
    pub item: usize,
    /// Index of the message (or item) in the request.
    pub message: usize,
    /// The call ID the result answers, when the wire format gives one.
    pub call_id: Option<Arc<str>>,
    /// The browser tool that produced it, as the request spells it.
    pub tool: Arc<str>,
    /// Short ID of the result (see [`observation_id`](crate::receipt::observation_id)).
    pub observation_id: Arc<str>,
    /// What the result is, after projection.
    pub status: Status,
    /// Name of the observation format that recognised it; `None` when none did.
    pub format: Option<&'static str>,
    /// The page URL it names, if any.
    pub url: Option<Arc<str>>,
    /// The page title it names, if any.
    pub title: Option<Arc<str>>,
    /// Text bytes before projection.
    pub bytes_before: usize,
    /// Text bytes after projection: the receipt's when it collapsed.
    pub bytes_after: usize,
    /// Actionable refs that its collapse took out of the request.
    pub refs_withheld: usize,
    /// Images (in the text or beside it) that its collapse dropped.
    pub images_dropped: usize,
}

/// A replacement of one result's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Index of the item in the transcript.
    pub item: usize,
    /// The new text of the result (image parts are dropped), or, when `append` is set,
    /// text added after the result's own content, which stays byte-identical. Shared: a
    /// report of a long session lists thousands, and checkpoints keep them.
    pub text: Arc<str>,
    /// Add `text` after the result's content instead of replacing it (evidence, guidance).
    pub append: bool,
}

/// The outcome of projection: a report per browser result, and the edits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One report per browser result, in transcript order.
    pub results: Vec<ResultReport>,
    /// The edits to write into the body: receipts, then any appended evidence or guidance.
    pub edits: Vec<Edit>,
}

impl Plan {
    /// How many observations collapse.
    pub fn collapsed(&self) -> usize {
        self.edits.iter().filter(|e| !e.append).count()
    }

    /// Text bytes saved by the edits.
    pub fn saved_bytes(&self) -> usize {
        self.results
            .iter()
            .map(|r| r.bytes_before.saturating_sub(r.bytes_after))
            .sum()
    }
}

/// Plans the projection of `session`: every observation before the live page state
/// collapses to its receipt, and every browser result gets its report.
pub fn plan(session: &Session<'_>, receipt_max_bytes: usize) -> Plan {
    let live_from = live_start(&session.steps);
    let mut plan = Plan::default();
    for (i, step) in session.steps.iter().enumerate() {
        let collapse = step.tree_kind().is_some() && live_from.is_some_and(|start| i < start);
        let report = report(step, collapse, receipt_max_bytes, &mut plan.edits);
        plan.results.push(report);
    }
    plan
}

/// Index (in `steps`) where the live page state starts: the newest observation, or, when
/// that is an incremental diff, the last full tree it updates.
pub fn live_start(steps: &[Step<'_>]) -> Option<usize> {
    let newest = steps.iter().rposition(|s| s.tree_kind().is_some())?;
    if steps[newest].tree_kind() != Some(TreeKind::Diff) {
        return Some(newest);
    }
    let mut start = newest;
    for i in (0..newest).rev() {
        match steps[i].tree_kind() {
            Some(TreeKind::Full) => return Some(i),
            Some(_) => start = i,
            None => {}
        }
    }
    Some(start)
}

fn report(
    step: &Step<'_>,
    collapse: bool,
    receipt_max_bytes: usize,
    edits: &mut Vec<Edit>,
) -> ResultReport {
    let reading = &step.reading;
    let status = status_of(step, collapse);
    let mut bytes_after = step.text.len();
    let (mut refs_withheld, mut images_dropped) = (0, 0);
    let receipt = collapse
        .then(|| reading.receipt(step.tool, step.images, receipt_max_bytes))
        .flatten();
    if let (Some(collapsed), Some(header)) = (receipt, &reading.header) {
        bytes_after = collapsed.len();
        refs_withheld = header.refs;
        images_dropped = step.images + header.images;
        edits.push(Edit {
            item: step.item,
            text: collapsed.into(),
            append: false,
        });
    }
    let header = reading.header.as_ref();
    ResultReport {
        item: step.item,
        message: step.message,
        call_id: step.call_id.map(Arc::from),
        tool: Arc::from(step.tool),
        observation_id: Arc::from(reading.id.as_str()),
        status,
        format: header.map(|o| o.format),
        url: header.and_then(|o| o.url.as_deref()).map(Arc::from),
        title: header.and_then(|o| o.title.as_deref()).map(Arc::from),
        bytes_before: step.text.len(),
        bytes_after,
        refs_withheld,
        images_dropped,
    }
}

fn status_of(s: &Step<'_>, collapse: bool) -> Status {
    if s.failed {
        return Status::Failed;
    }
    if s.reading.collapsed || collapse {
        return Status::Collapsed;
    }
    match (&s.reading.header, s.tree_kind()) {
        (_, Some(_)) => Status::Live,
        (Some(o), None) if o.kind == TreeKind::Report => Status::PageReport,
        _ => Status::Other,
    }
}
