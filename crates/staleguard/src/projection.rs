//! Projection (SPEC 2): every browser observation but the newest collapses to a receipt.
//!
//! [`plan`] reads a neutral [`Transcript`] and decides, for every browser result, what it
//! is and whether it collapses. It returns the edits; adapters write them into the body.

use crate::config::Config;
use crate::failure::is_failed;
use crate::observation::{self, Observation, TreeKind};
use crate::receipt::{self, ReceiptInput};
use crate::tools::BrowserTools;
use crate::transcript::{ToolResult, Transcript};

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
    pub call_id: Option<String>,
    pub tool: String,
    /// Short ID of the result (see [`receipt::observation_id`]).
    pub observation_id: String,
    pub status: Status,
    pub format: Option<&'static str>,
    pub url: Option<String>,
    pub title: Option<String>,
    /// Text bytes before and after projection.
    pub bytes_before: usize,
    pub bytes_after: usize,
    pub refs_withheld: usize,
    pub images_dropped: usize,
}

/// A replacement of one result's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    /// Index of the item in the transcript.
    pub item: usize,
    /// The new text of the result (image parts are dropped), or, when `append` is set,
    /// text added after the result's own content, which stays byte-identical.
    pub text: String,
    pub append: bool,
}

/// The outcome of projection: a report per browser result, and the edits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub results: Vec<ResultReport>,
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

/// A browser result while planning. Everything that reads the result's text is computed
/// here, in one visit while the text is in cache: a request holds MBs of results.
struct Seen<'t, 'a> {
    item: usize,
    tool: &'t str,
    failed: bool,
    observation: Option<Observation<'t>>,
    result: &'t ToolResult<'a>,
    /// See [`receipt::observation_id`].
    id: String,
    /// The text's verification lines, for results that may collapse.
    verification: Vec<String>,
}

impl<'t, 'a> Seen<'t, 'a> {
    fn read(item: usize, tool: &'t str, result: &'t ToolResult<'a>, config: &Config) -> Self {
        let text = &result.text;
        let failed = result.is_error || is_failed(text);
        let observation = observation::parse_header(text);
        let id = receipt::observation_id(text);
        let mut s = Seen {
            item,
            tool,
            failed,
            observation,
            result,
            id,
            verification: Vec::new(),
        };
        if config.browser_history_compaction && s.tree().is_some() {
            s.verification = receipt::verification_lines(text);
        }
        s
    }

    fn tree(&self) -> Option<TreeKind> {
        match &self.observation {
            Some(o) if !self.failed && o.is_observation() => Some(o.kind),
            _ => None,
        }
    }
}

/// Plans the projection of `transcript`. Collapses only when compaction is on in `config`;
/// the report is complete either way.
pub fn plan(transcript: &Transcript<'_>, config: &Config) -> Plan {
    let seen = browser_results(transcript, config);
    let live_from = live_start(&seen);
    let mut plan = Plan::default();
    for (i, s) in seen.into_iter().enumerate() {
        let collapse = config.browser_history_compaction
            && s.tree().is_some()
            && live_from.is_some_and(|start| i < start);
        let report = report(s, collapse, config, &mut plan.edits);
        plan.results.push(report);
    }
    plan
}

fn browser_results<'t, 'a>(transcript: &'t Transcript<'a>, config: &Config) -> Vec<Seen<'t, 'a>> {
    let tools = BrowserTools::new(&config.browser_tools);
    tools
        .results_in(transcript)
        .into_iter()
        .map(|(item, call, result)| Seen::read(item, &call.name, result, config))
        .collect()
}

/// Index (in `seen`) where the live page state starts: the newest observation, or, when
/// that is an incremental diff, the last full tree it updates.
fn live_start(seen: &[Seen<'_, '_>]) -> Option<usize> {
    let newest = seen.iter().rposition(|s| s.tree().is_some())?;
    if seen[newest].tree() != Some(TreeKind::Diff) {
        return Some(newest);
    }
    let mut start = newest;
    for i in (0..newest).rev() {
        match seen[i].tree() {
            Some(TreeKind::Full) => return Some(i),
            Some(_) => start = i,
            None => {}
        }
    }
    Some(start)
}

fn report(s: Seen<'_, '_>, collapse: bool, config: &Config, edits: &mut Vec<Edit>) -> ResultReport {
    let text = s.result.text.as_ref();
    let status = status_of(&s, collapse);
    let mut bytes_after = text.len();
    let (mut refs_withheld, mut images_dropped) = (0, 0);
    if let (true, Some(obs)) = (collapse, &s.observation) {
        let images = s.result.images + obs.images;
        let input = ReceiptInput {
            id: &s.id,
            tool: s.tool,
            observation: obs,
            images_dropped: images,
        };
        let collapsed = receipt::collapse_with(&input, &s.verification, config.receipt_max_bytes);
        bytes_after = collapsed.len();
        refs_withheld = obs.ref_count();
        images_dropped = images;
        edits.push(Edit {
            item: s.item,
            text: collapsed,
            append: false,
        });
    }
    let obs = s.observation.as_ref();
    ResultReport {
        item: s.item,
        message: s.result.message,
        call_id: s.result.call_id.as_deref().map(str::to_string),
        tool: s.tool.to_string(),
        observation_id: s.id,
        status,
        format: obs.map(|o| o.format),
        url: obs.and_then(|o| o.url.as_deref()).map(str::to_string),
        title: obs.and_then(|o| o.title.as_deref()).map(str::to_string),
        bytes_before: text.len(),
        bytes_after,
        refs_withheld,
        images_dropped,
    }
}

fn status_of(s: &Seen<'_, '_>, collapse: bool) -> Status {
    if s.failed {
        return Status::Failed;
    }
    if receipt::is_collapsed(&s.result.text) || collapse {
        return Status::Collapsed;
    }
    match (&s.observation, s.tree()) {
        (_, Some(_)) => Status::Live,
        (Some(o), None) if o.kind == TreeKind::Report => Status::PageReport,
        _ => Status::Other,
    }
}
