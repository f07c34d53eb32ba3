//! The `inspect` report: every browser result, then totals in bytes and tokens.

use serde::Serialize;
use staleguard::Quote;
use staleguard::Verdict;
use staleguard::{EvidenceReport, Projection, ResultReport};

/// Tokens counted with the o200k_base encoding (GPT-4o and later).
fn count_tokens(text: &str) -> usize {
    match tiktoken_rs::o200k_base() {
        Ok(bpe) => bpe.encode_ordinary(text).len(),
        Err(_) => 0,
    }
}

#[derive(Serialize)]
pub struct Report<'p> {
    format: &'static str,
    format_reason: &'static str,
    server_side_history: bool,
    /// Anthropic: the `cache_control` breakpoint of ours (`added`, `already_there`,
    /// `no_room`), `null` for other formats.
    breakpoint: Option<&'static str>,
    /// The message of the first observation that had waited and that this request collapses
    /// (SPEC 9, C5): where its history differs from the previous request's.
    waited_collapses_from: Option<usize>,
    results: Vec<Row<'p>>,
    calls: Vec<CallRow>,
    stalled: bool,
    evidence: &'p EvidenceReport,
    totals: Totals,
}

#[derive(Serialize)]
struct Row<'p> {
    message: usize,
    call_id: Option<&'p str>,
    observation: &'p str,
    tool: &'p str,
    status: &'static str,
    url: Option<&'p str>,
    title: Option<&'p str>,
    bytes_before: usize,
    bytes_after: usize,
    refs_withheld: usize,
    images_dropped: usize,
    fingerprint: Option<String>,
    no_progress: Option<u32>,
    /// What the lean form of a live page left out (`live_page = "lean"`).
    folded: Option<Folded>,
}

/// What a lean live page folded: marker lines, and the lines and bytes behind them.
#[derive(Serialize)]
struct Folded {
    runs: usize,
    lines: usize,
    bytes: usize,
}

/// The guard's verdict on one browser call, against the transcript before it.
#[derive(Serialize)]
struct CallRow {
    message: usize,
    tool: String,
    verdict: &'static str,
    reason: Option<String>,
    /// The refusal's kind as the README and the MCP guard's log name it (`StaleRef`).
    refusal: Option<String>,
    repeated_submission: bool,
}

#[derive(Serialize)]
struct Totals {
    browser_results: usize,
    collapsed: usize,
    /// Older observations whose collapse waits until it pays (C5).
    waiting: usize,
    bytes_before: usize,
    bytes_after: usize,
    tokens_before: usize,
    tokens_after: usize,
    refs_withheld: usize,
}

impl<'p> Report<'p> {
    /// The report of `projected`, which must have been made with verdicts.
    pub fn new(original: &str, projected: &'p Projection) -> Self {
        let mut results: Vec<Row<'p>> = projected.report().results.iter().map(Row::from).collect();
        let (calls, stalled) = progress_and_guard(projected, &mut results);
        let totals = Totals {
            browser_results: results.len(),
            collapsed: projected.report().collapsed(),
            waiting: results.iter().filter(|r| r.status == "waiting").count(),
            bytes_before: original.len(),
            bytes_after: projected.body.len(),
            tokens_before: count_tokens(original),
            tokens_after: count_tokens(&projected.body),
            refs_withheld: results.iter().map(|r| r.refs_withheld).sum(),
        };
        Report {
            format: projected.format.name(),
            format_reason: projected.format_reason,
            server_side_history: projected.server_side_history,
            breakpoint: projected.breakpoint.map(staleguard::Breakpoint::as_str),
            waited_collapses_from: projected.report().batch_result().map(|r| r.message),
            results,
            calls,
            stalled,
            evidence: &projected.evidence,
            totals,
        }
    }

    pub fn to_json(&self) -> String {
        let mut s =
            serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }

    pub fn to_table(&self) -> String {
        let mut out = format!("format: {} ({})\n", self.format, self.format_reason);
        if self.server_side_history {
            out.push_str("earlier turns are server-side (previous_response_id / conversation): only the items in this request were projected\n");
        }
        match self.breakpoint {
            Some("no_room") => out.push_str("cache breakpoint: no room (the request has 4 cache_control breakpoints already); the next turn reads the cache only as far as those reach\n"),
            Some(b) => out.push_str(&format!("cache breakpoint of ours before the newest page: {b}\n")),
            None => {}
        }
        if self.totals.waiting > 0 {
            out.push_str(&format!("collapses that wait until they pay (the guard stands in front, SPEC 9 C5): {} observations, their refs still refused by the guard\n", self.totals.waiting));
        }
        if let Some(message) = self.waited_collapses_from {
            out.push_str(&format!("this request collapses observations that waited, from message {message}: the one place its history differs from the previous request's\n"));
        }
        out.push_str(&format!(
            "{:>4}  {:<8}  {:<22}  {:<11}  {:>8}  {:>7}  {:>5}  {:<8}  {:>2}  {}\n",
            "msg", "obs", "tool", "status", "before", "after", "refs", "page", "np", "url / title"
        ));
        for r in &self.results {
            out.push_str(&format!(
                "{:>4}  {:<8}  {:<22}  {:<11}  {:>8}  {:>7}  {:>5}  {:<8}  {:>2}  {}{}\n",
                r.message,
                r.observation,
                clip(r.tool, 22),
                r.status,
                r.bytes_before,
                r.bytes_after,
                r.refs_withheld,
                r.fingerprint.as_deref().unwrap_or("-"),
                r.no_progress.map_or("-".to_string(), |n| n.to_string()),
                clip(r.url.unwrap_or("-"), 60),
                r.title
                    .map(|t| format!("  \"{}\"", clip(t, 40)))
                    .unwrap_or_default()
            ));
        }
        for r in &self.results {
            if let Some(f) = &r.folded {
                out.push_str(&format!(
                    "lean live page at message {}: {} lines ({} bytes) of page text folded in {} places; every control kept\n",
                    r.message, f.lines, f.bytes, f.runs
                ));
            }
        }
        out.push_str(&self.guard_table());
        out.push_str(&evidence_table(self.evidence));
        let t = &self.totals;
        out.push_str(&format!(
            "\ntotal: {} browser results, {} collapsed, {} waiting, {} refs withheld\nbytes:  {} -> {} ({})\ntokens: {} -> {} ({}, o200k_base)\n",
            t.browser_results,
            t.collapsed,
            t.waiting,
            t.refs_withheld,
            t.bytes_before,
            t.bytes_after,
            percent(t.bytes_before, t.bytes_after),
            t.tokens_before,
            t.tokens_after,
            percent(t.tokens_before, t.tokens_after),
        ));
        out
    }
}

impl<'p> From<&'p ResultReport> for Row<'p> {
    fn from(r: &'p ResultReport) -> Self {
        Row {
            message: r.message,
            call_id: r.call_id.as_deref(),
            observation: &r.observation_id,
            tool: &r.tool,
            status: r.status.as_str(),
            url: r.url.as_deref(),
            title: r.title.as_deref(),
            bytes_before: r.bytes_before,
            bytes_after: r.bytes_after,
            refs_withheld: r.refs_withheld,
            images_dropped: r.images_dropped,
            fingerprint: None,
            no_progress: None,
            folded: r.folded.map(|f| Folded {
                runs: f.runs,
                lines: f.lines,
                bytes: f.bytes,
            }),
        }
    }
}

impl Report<'_> {
    fn guard_table(&self) -> String {
        let mut out = format!(
            "\nprogress: {}\nguard (each browser call against the transcript before it):\n",
            if self.stalled {
                "stalled: no-progress guidance appended"
            } else {
                "not stalled"
            }
        );
        for c in &self.calls {
            out.push_str(&format!(
                "  {:>4}  {:<22}  {:<7}{}{}\n",
                c.message,
                clip(&c.tool, 22),
                c.verdict,
                match (&c.refusal, c.repeated_submission) {
                    (Some(kind), _) => format!("  [{kind}]"),
                    (None, true) => "  [repeated submission]".to_string(),
                    (None, false) => String::new(),
                },
                c.reason
                    .as_deref()
                    .map(|r| format!("  {}", clip(r, 150)))
                    .unwrap_or_default()
            ));
        }
        out
    }
}

/// Fingerprints and no-progress counts into the rows; the guard's verdict on every call.
fn progress_and_guard(projected: &Projection, rows: &mut [Row<'_>]) -> (Vec<CallRow>, bool) {
    let Some(progress) = &projected.progress else {
        return (Vec::new(), false);
    };
    // One progress step per browser result, in the order of the rows.
    for (row, step) in rows.iter_mut().zip(&progress.steps) {
        row.fingerprint = Some(step.fingerprint.short());
        row.no_progress = Some(step.no_progress);
    }
    let calls = projected
        .verdicts
        .iter()
        .map(|v| {
            let (word, reason, refusal) = match &v.verdict {
                Verdict::Allow { note } => ("allow", note.clone(), None),
                Verdict::Refuse { message, why } => {
                    ("refuse", Some(message.clone()), Some(format!("{why:?}")))
                }
            };
            CallRow {
                message: v.message,
                tool: v.tool.clone(),
                verdict: word,
                reason,
                refusal,
                repeated_submission: progress.repeated.iter().any(|r| r.call == v.item),
            }
        })
        .collect();
    (calls, progress.stalled())
}

fn evidence_table(e: &EvidenceReport) -> String {
    let mut out = format!(
        "\nevidence: {} retained ({} bytes), {} refused, {} omitted by the budget, {} dropped\n",
        e.retained.len(),
        e.bytes,
        e.refused.len(),
        e.omitted.len(),
        e.dropped.len()
    );
    let row = |kind: &str, q: &Quote| {
        format!(
            "  {kind:<8}  {:<8}  {}  \"{}\"\n",
            q.observation,
            clip(&q.source_url, 50),
            clip(&q.quote, 60)
        )
    };
    for q in &e.retained {
        out.push_str(&row("kept", q));
    }
    for q in &e.refused {
        out.push_str(&row("refused", q));
    }
    for q in &e.omitted {
        out.push_str(&row("omitted", q));
    }
    for (item, reason) in &e.dropped {
        out.push_str(&format!(
            "  dropped   {:<8}  {}  \"{}\" ({})\n",
            clip(&item.observation, 8),
            clip(&item.source_url, 50),
            clip(&item.quote, 40),
            reason.as_str()
        ));
    }
    out
}

fn percent(before: usize, after: usize) -> String {
    if before == 0 {
        return "n/a".into();
    }
    let change = (after as f64 - before as f64) * 100.0 / before as f64;
    format!("{change:+.1}%")
}

/// Shortens `s` to `max` characters for the table, marking the cut.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max.saturating_sub(1)).collect();
    format!("{head}…")
}
