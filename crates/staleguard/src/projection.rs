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

use crate::memo::{Memo, Share};
use crate::observation::TreeKind;
use crate::reading::Header;
use crate::receipt::{self, StaleLine};
use crate::session::{Session, Step};
use crate::transcript::Edit;

/// What a browser result is, after projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Part of the newest page state: kept as it is.
    Live,
    /// An older observation, replaced by its receipt.
    Collapsed,
    /// An older observation whose collapse waits until it pays (SPEC 9, C5): kept as it
    /// is, though no longer live (the MCP guard refuses its refs).
    Waiting,
    /// A failure: never collapsed.
    Failed,
    /// Names a page but carries no tree: kept.
    PageReport,
    /// A browser result that is neither an observation nor a page report: kept.
    Other,
}

impl Status {
    /// The status as reports print it: `live`, `collapsed`, `waiting`, `failed`, `page
    /// report`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Live => "live",
            Status::Collapsed => "collapsed",
            Status::Waiting => "waiting",
            Status::Failed => "failed",
            Status::PageReport => "page report",
            Status::Other => "other",
        }
    }
}

/// What a lean live page folded (SPEC 2), as a result's report tells it. The lean stage
/// writes it; it lives here, with the report, so that projection names nothing above it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Folded {
    /// Marker lines written: one per folded run.
    pub runs: usize,
    /// Lines of the page folded away.
    pub lines: usize,
    /// Bytes of the page folded away.
    pub bytes: usize,
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
    /// Short ID of the result: the one its receipt and the [`Archive`](crate::Archive) show.
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
    /// What the lean form of a live page folded (SPEC 2 "Lean live page"); `None` when the
    /// page is sent whole.
    pub folded: Option<Folded>,
}

/// The outcome of projection: a report per browser result, and the edits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// One report per browser result, in transcript order.
    pub results: Vec<ResultReport>,
    /// The edits to write into the body: receipts, then any appended evidence or guidance.
    pub edits: Vec<Edit>,
    /// The first observation (its transcript item) that had waited and that this request
    /// collapses (SPEC 9, C5): the one place where its history differs from the previous
    /// request's.
    pub batch: Option<usize>,
    /// Per result, where collapses wait: the transcript item at which the turn that
    /// collapsed it starts. Empty when every collapse happens at once.
    pub(crate) collapsed_at: Vec<Option<usize>>,
}

impl Plan {
    /// How many observations collapse.
    pub fn collapsed(&self) -> usize {
        // Every replacement is a receipt, but the lean form of a live page.
        let replaced = self.edits.iter().filter(|e| !e.append).count();
        let lean = self.results.iter().filter(|r| r.folded.is_some()).count();
        replaced.saturating_sub(lean)
    }

    /// The report of the first observation that had waited and that this request
    /// collapses ([`batch`](Self::batch)).
    pub fn batch_result(&self) -> Option<&ResultReport> {
        let item = self.batch?;
        self.results.iter().find(|r| r.item == item)
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
/// collapses to its receipt, and every browser result gets its report. The first
/// observation to collapse carries the full stale notice, unless `notice_written` (a
/// result before the session's first step, or one of its steps, is already collapsed).
pub(crate) fn plan(session: &Session<'_>, receipt_max_bytes: usize, notice_written: bool) -> Plan {
    plan_with(session, receipt_max_bytes, notice_written, &[], false)
}

/// [`plan`], where an older observation collapses only once `collapsed_at` (one entry per
/// step; empty: every one at once) says so, and waits till then (SPEC 9, C5). Collapses
/// wait only where the guard stands in front of the browser, so the stale notice then names
/// the guard's `browser_history`, the way back to a collapsed observation (SPEC 2).
pub(crate) fn plan_waiting(
    session: &Session<'_>,
    receipt_max_bytes: usize,
    notice_written: bool,
    collapsed_at: &[Option<usize>],
) -> Plan {
    plan_with(
        session,
        receipt_max_bytes,
        notice_written,
        collapsed_at,
        true,
    )
}

/// The plan; with `history`, the stale notice names the guard's `browser_history`.
fn plan_with(
    session: &Session<'_>,
    receipt_max_bytes: usize,
    notice_written: bool,
    collapsed_at: &[Option<usize>],
    history: bool,
) -> Plan {
    let live_from = live_start(&session.steps);
    let mut plan = Plan {
        collapsed_at: collapsed_at.to_vec(),
        ..Plan::default()
    };
    let mut notice_due = !notice_written;
    for (i, step) in session.steps.iter().enumerate() {
        let older = step.outdated || live_from.is_some_and(|start| i < start);
        let due = step.tree_kind().is_some() && older;
        let waits = due && collapsed_at.get(i).is_some_and(Option::is_none);
        let receipt = Receipt {
            max_bytes: receipt_max_bytes,
            stale: StaleLine::new(notice_due, history),
        };
        let collapse = (due && !waits, waits);
        let report = report(session.memo, step, collapse, receipt, &mut plan.edits);
        notice_due &= report.status != Status::Collapsed;
        plan.results.push(report);
    }
    plan
}

/// How a receipt is written: its byte cap, and the line under it.
#[derive(Clone, Copy)]
struct Receipt {
    max_bytes: usize,
    stale: StaleLine,
}

/// Index (in `steps`) where the live page state starts: the newest observation, or, when
/// that is an incremental diff, the last full tree it updates.
pub(crate) fn live_start(steps: &[Step<'_>]) -> Option<usize> {
    let newest = steps.iter().rposition(|s| live_kind(s).is_some())?;
    match live_kind(&steps[newest]) {
        Some(TreeKind::Diff) => {}
        Some(TreeKind::Partial) => return Some(partial_start(steps, newest)),
        _ => return Some(newest),
    }
    let mut start = newest;
    for i in (0..newest).rev() {
        match live_kind(&steps[i]) {
            Some(TreeKind::Full) => return Some(i),
            Some(_) => start = i,
            None => {}
        }
    }
    Some(start)
}

/// Where the live page state starts when its newest observation is partial: at the full
/// tree it refines, unless a result since said the page has a tree the model has not read
/// (a linked snapshot file, another page): then at the first partial after that.
fn partial_start(steps: &[Step<'_>], newest: usize) -> usize {
    let mut start = newest;
    for i in (0..newest).rev() {
        let step = &steps[i];
        match live_kind(step) {
            Some(TreeKind::Full) => return i,
            Some(_) => start = i,
            None if !step.failed && supersedes(step, &steps[start]) => return start,
            None => {}
        }
    }
    start
}

/// The kind of tree a step can make live: none for an old file read again.
fn live_kind(step: &Step<'_>) -> Option<TreeKind> {
    step.tree_kind().filter(|_| !step.outdated)
}

/// A page report that supersedes the tree before it: it links a tree of its own, or names
/// another page than `part`.
fn supersedes(report: &Step<'_>, part: &Step<'_>) -> bool {
    let Some(header) = &report.reading.header else {
        return false;
    };
    let other_page = match (
        &header.url,
        part.reading.header.as_ref().and_then(|h| h.url.as_ref()),
    ) {
        (Some(a), Some(b)) => a != b,
        _ => false,
    };
    header.linked.is_some() || other_page
}

/// The report of `step`; `(collapse, waits)`: whether it collapses now, or waits to.
fn report(
    memo: &Memo,
    step: &Step<'_>,
    (collapse, waits): (bool, bool),
    form: Receipt,
    edits: &mut Vec<Edit>,
) -> ResultReport {
    let reading = &step.reading;
    let status = match status_of(step, collapse) {
        Status::Live if waits => Status::Waiting,
        status => status,
    };
    let mut bytes_after = step.text.len();
    let (mut refs_withheld, mut images_dropped) = (0, 0);
    let receipt = collapse.then(|| receipt_of(memo, step, form)).flatten();
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
    let named = named_header(step);
    let header = named.as_deref();
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
        folded: None,
    }
}

/// A rendered receipt and what it was rendered for: a collapsed result is collapsed again
/// on every later turn, nearly always with the same images under the same config.
struct KeptReceipt {
    images: usize,
    max_bytes: usize,
    stale: StaleLine,
    text: String,
}

/// The collapsed form of `step`'s observation, rendered once for its text, images, bound
/// and notice, and kept in the memo; `None` when it names no page.
fn receipt_of(memo: &Memo, step: &Step<'_>, form: Receipt) -> Option<String> {
    let reading = &step.reading;
    let header = &*named_header(step)?;
    let images = step.images;
    let Receipt { max_bytes, stale } = form;
    let render = || {
        let input = receipt::ReceiptInput {
            id: &reading.id,
            header,
            images_dropped: images + header.images,
        };
        let text = receipt::collapse_with(&input, &reading.verification, max_bytes, stale);
        KeptReceipt {
            images,
            max_bytes,
            stale,
            text,
        }
    };
    let mut context = xxhash_rust::xxh3::Xxh3::new();
    if let Some(page) = &step.linked_page {
        // The page a read-back file shows comes from the call around it, not its text.
        for name in [&page.url, &page.title] {
            let name = name.as_deref().unwrap_or("");
            context.update(&name.len().to_le_bytes());
            context.update(name.as_bytes());
        }
    }
    context.update(&images.to_le_bytes());
    context.update(&max_bytes.to_le_bytes());
    context.update(&[stale as u8]);
    let same = |k: &KeptReceipt| (k.images, k.max_bytes, k.stale) == (images, max_bytes, stale);
    let weigh = |k: &KeptReceipt| (RECEIPT_ENTRY_BYTES + k.text.capacity()) as u64;
    let at = (step.key, context.digest128());
    let kept = memo.kept(Share::Texts, at, same, render, weigh);
    Some(kept.text.clone())
}

/// The page `step` names: its header, with the URL and title of the browser result that
/// linked the file when the step reads one back and its text names neither.
pub(crate) fn named_header<'s>(step: &'s Step<'_>) -> Option<std::borrow::Cow<'s, Header>> {
    let header = step.reading.header.as_ref()?;
    match &step.linked_page {
        Some(page) if header.url.is_none() && header.title.is_none() => {
            let mut named = header.clone();
            named.url.clone_from(&page.url);
            named.title.clone_from(&page.title);
            Some(std::borrow::Cow::Owned(named))
        }
        _ => Some(std::borrow::Cow::Borrowed(header)),
    }
}

/// Bytes of a kept receipt besides its text and tool: the entry, its key and counts.
const RECEIPT_ENTRY_BYTES: usize = 128;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{read_request, RequestFormat};
    use crate::reading::{Depth, Reader};
    use crate::receipt::{STALE_NOTICE, STALE_WORD};
    use crate::tools::{BrowserTools, DEFAULT_BROWSER_TOOLS};

    /// A kept receipt is only reused for the inputs it was rendered for.
    #[test]
    fn kept_receipts_match_a_fresh_rendering() {
        let page = "### Page state\n- Page URL: http://a.test/\n- Page Title: A\n```yaml\n- button \"Go\" [ref=e1]\n```";
        let body = serde_json::json!({"messages": [
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "browser_click", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": page},
        ]})
        .to_string();
        let (request, _, _) = read_request(&body, RequestFormat::OpenAiChat).expect("request");
        let tools = BrowserTools::new(DEFAULT_BROWSER_TOOLS);
        let memo = Memo::for_request();
        let reader = Reader {
            memo: &memo,
            depth: Depth::Header,
        };
        let session = Session::read(request.transcript(), &tools, reader);
        let step = &session.steps[0];
        let form = |max_bytes, notice| Receipt {
            max_bytes,
            stale: StaleLine::new(notice, false),
        };
        let fresh = |images: usize, max: usize, notice: bool| {
            let mut alone = step.clone();
            alone.images = images;
            receipt_of(&Memo::for_request(), &alone, form(max, notice))
        };
        let cases = [
            (0, 4096, true),
            (0, 4096, false),
            (2, 4096, false),
            (0, 40, false),
            (0, 4096, true),
        ];
        for (images, max, notice) in cases {
            let mut asked = step.clone();
            asked.images = images;
            let kept = receipt_of(&memo, &asked, form(max, notice));
            let stale = if notice { STALE_NOTICE } else { STALE_WORD };
            assert_eq!(kept.as_deref().and_then(|r| r.lines().nth(1)), Some(stale));
            assert_eq!(kept, fresh(images, max, notice), "{images} {max} {notice}");
        }
    }
}
