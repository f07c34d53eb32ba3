//! What a projection answers: the body to send and what every analysis found.

use std::sync::Arc;

use crate::adapter::{Breakpoint, RequestFormat};
use crate::body::Body;
use crate::evidence::EvidenceReport;
use crate::guard::Verdict;
use crate::progress::Progress;
use crate::projection::Plan;

use super::resume::ReportParts;

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
    pub(crate) report: Report,
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
pub(crate) struct Report {
    plan: std::sync::OnceLock<Plan>,
    parts: Option<Arc<ReportParts>>,
    collapsed: usize,
}

impl Report {
    pub(crate) fn whole(plan: Plan) -> Report {
        Report {
            collapsed: plan.collapsed(),
            plan: std::sync::OnceLock::from(plan),
            parts: None,
        }
    }

    /// The plan of a resumed request: the checkpoint's parts and the tail's, which
    /// collapse `collapsed` observations in all.
    pub(crate) fn in_parts(parts: ReportParts, collapsed: usize) -> Report {
        Report {
            plan: std::sync::OnceLock::new(),
            parts: Some(Arc::new(parts)),
            collapsed,
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
