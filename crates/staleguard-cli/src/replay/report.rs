//! What `staleguard replay` prints: a table per session, a summary over sessions, CSV, and a
//! chart of the cost of every turn.

use std::fmt::Write as _;

use super::{Bill, Model, SessionReplay, StrategyReplay, Turn, STRATEGIES};
use crate::Failure;

/// A table per session, then, for more than one, a summary line per session.
pub(super) fn tables(replays: &[SessionReplay], per_turn: bool) -> String {
    let mut out = String::new();
    for replay in replays {
        session_table(replay, per_turn, &mut out);
        out.push('\n');
    }
    if replays.len() > 1 {
        summary(replays, &mut out);
    }
    out
}

fn model_name(model: Model) -> &'static str {
    match model {
        Model::Prefix => "prefix",
        Model::Breakpoints => "breakpoints",
    }
}

fn session_table(r: &SessionReplay, per_turn: bool, out: &mut String) {
    let p = &r.pricing;
    let _ = writeln!(
        out,
        "{}: {}, {} turns, cache model {} (read x{}, write x{}, TTL {} s, turns {} s apart)",
        r.session,
        r.format,
        r.turns,
        model_name(r.cache_model),
        p.read,
        p.write,
        p.ttl_secs,
        p.spacing_secs
    );
    if per_turn {
        per_turn_rows(r, out);
    }
    let _ = writeln!(
        out,
        "  {:<15} {BILL_HEAD} {:>7} {:>13} {:>6} {:>10}",
        "strategy", "x none", "x newest-only", "stale", "C1 breaks"
    );
    for s in &r.strategies {
        let _ = writeln!(
            out,
            "  {:<15} {} {:>7.3} {:>13.3} {:>6} {:>10}",
            s.strategy,
            bill_cells(&s.total),
            s.relative_to_none,
            s.relative_to_newest_only,
            s.stale_refs,
            s.frozen_history_broken.len()
        );
    }
    facts_rows(r, out);
    lean_rows(r, out);
    for w in &r.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
}

/// The columns of a [`Bill`], and their heads.
const BILL_HEAD: &str = "   sent B    read B  written B uncached B  cost units";

fn bill_cells(b: &Bill) -> String {
    format!(
        "{:>9} {:>9} {:>10} {:>10} {:>11.1}",
        b.sent_bytes, b.read_bytes, b.written_bytes, b.uncached_bytes, b.cost
    )
}

fn per_turn_rows(r: &SessionReplay, out: &mut String) {
    let _ = writeln!(
        out,
        "  {:>4}  {:<15} {BILL_HEAD} {:>3} {:>6} {:>3}",
        "turn", "strategy", "bp", "stale", "C1"
    );
    for turn in 0..r.turns {
        for s in &r.strategies {
            if let Some(t) = s.turns.get(turn) {
                turn_row(s.strategy, t, out);
            }
        }
    }
}

fn turn_row(strategy: &str, t: &Turn, out: &mut String) {
    let _ = writeln!(
        out,
        "  {:>4}  {:<15} {} {:>3} {:>6} {:>3}",
        t.turn,
        strategy,
        bill_cells(&t.bill),
        t.bill.breakpoints,
        t.stale_refs,
        if t.frozen_history_broken { "x" } else { "" }
    );
}

fn lean_rows(r: &SessionReplay, out: &mut String) {
    if r.lean_pages.is_empty() {
        return;
    }
    let _ = writeln!(out, "  pages staleguard-lean sent lean:");
    let _ = writeln!(
        out,
        "  {:>4} {:>7} {:>12} {:>12} {:>7} {:>11} {:>8}  url",
        "turn", "message", "tokens whole", "tokens lean", "lean %", "actionable", "missing"
    );
    for p in &r.lean_pages {
        let share = 100.0 * p.tokens_lean as f64 / p.tokens_whole.max(1) as f64;
        let _ = writeln!(
            out,
            "  {:>4} {:>7} {:>12} {:>12} {:>6.1}% {:>11} {:>8}  {}",
            p.turn,
            p.message,
            p.tokens_whole,
            p.tokens_lean,
            share,
            p.actionable_refs,
            p.missing_refs.len(),
            p.url.as_deref().unwrap_or("")
        );
    }
}

fn facts_rows(r: &SessionReplay, out: &mut String) {
    if r.facts.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  facts, each in the request that needs it (or the call it names that reaches it: history, again, find):"
    );
    let mut head = format!("  {:<10} {:>4}", "needed in", "turn");
    STRATEGIES.iter().for_each(|s| {
        let _ = write!(head, "  {s}");
    });
    let _ = writeln!(out, "{head}  fact");
    for f in &r.facts {
        let mut row = format!("  {:<10} {:>4}", f.needed_in.as_str(), f.turn);
        for (strategy, present) in &f.present {
            let call = f.one_call.iter().find(|(s, _)| s == strategy);
            let mark = match (present, call) {
                (true, _) => "yes",
                (false, Some((_, way))) => way.as_str(),
                (false, None) => "NO",
            };
            let _ = write!(row, "  {mark:<w$}", w = strategy.len());
        }
        let _ = writeln!(out, "{row}  {}", f.fact);
    }
}

/// Facts a strategy has where they are needed, as `kept/all`.
fn facts_kept(r: &SessionReplay, strategy: &str) -> String {
    let kept = r
        .facts
        .iter()
        .filter(|f| f.present.iter().any(|(s, p)| *s == strategy && *p))
        .count();
    format!("{kept}/{}", r.facts.len())
}

/// Facts a strategy has where they are needed or one named call away, as `kept/all`.
fn facts_reached(r: &SessionReplay, strategy: &str) -> String {
    let reached = r
        .facts
        .iter()
        .filter(|f| {
            let here = f.present.iter().any(|(s, p)| *s == strategy && *p);
            here || f.one_call.iter().any(|(s, _)| *s == strategy)
        })
        .count();
    format!("{reached}/{}", r.facts.len())
}

fn summary(replays: &[SessionReplay], out: &mut String) {
    let width = replays
        .iter()
        .map(|r| r.session.len())
        .max()
        .unwrap_or(7)
        .max(7);
    let _ = writeln!(
        out,
        "summary: cost relative to none; staleguard relative to newest-only; facts where needed (or one named call away)",
    );
    let _ = writeln!(
        out,
        "{:<width$} {:<11} {:>5} {:>11} {:>10} {:>14} {:>14} {:>11} {:>9} {:>9}",
        "session",
        "model",
        "turns",
        "newest-only",
        "staleguard",
        "clear-oldest-3",
        "sg/newest-only",
        "facts none",
        "facts sg",
        "+ a call"
    );
    for r in replays {
        let ratio = |name: &str| r.strategy(name).map_or(0.0, |s| s.relative_to_none);
        let sg: Option<&StrategyReplay> = r.strategy("staleguard");
        let _ = writeln!(
            out,
            "{:<width$} {:<11} {:>5} {:>11.3} {:>10.3} {:>14.3} {:>14.3} {:>11} {:>9} {:>9}",
            r.session,
            model_name(r.cache_model),
            r.turns,
            ratio("newest-only"),
            ratio("staleguard"),
            ratio("clear-oldest-3"),
            sg.map_or(0.0, |s| s.relative_to_newest_only),
            facts_kept(r, "none"),
            facts_kept(r, "staleguard"),
            facts_reached(r, "staleguard"),
        );
    }
    by_corpus(replays, out);
}

/// Facts where needed and the dearest session, per corpus: the folder a session was read
/// from (issue 28 reports held-out corpora apart from the ones tuned on).
fn by_corpus(replays: &[SessionReplay], out: &mut String) {
    let mut corpora: Vec<(&str, Vec<&SessionReplay>)> = Vec::new();
    for r in replays {
        let corpus = r.session.rsplit_once('/').map_or(".", |(dir, _)| dir);
        match corpora.iter_mut().find(|(c, _)| *c == corpus) {
            Some((_, rs)) => rs.push(r),
            None => corpora.push((corpus, vec![r])),
        }
    }
    if corpora
        .iter()
        .all(|(_, rs)| rs.iter().all(|r| r.facts.is_empty()))
    {
        return;
    }
    let width = corpora
        .iter()
        .map(|(c, _)| c.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(out, "\nfacts where needed, by corpus");
    let _ = writeln!(
        out,
        "{:<width$} {:>8} {:>11} {:>9} {:>7} {:>18}",
        "corpus", "sessions", "facts none", "facts sg", "sg %", "max sg/newest-only"
    );
    for (corpus, rs) in corpora {
        let count = |strategy: &str| -> usize {
            rs.iter()
                .flat_map(|r| &r.facts)
                .filter(|f| f.present.iter().any(|(s, p)| *s == strategy && *p))
                .count()
        };
        let all: usize = rs.iter().map(|r| r.facts.len()).sum();
        let dearest = (rs.iter())
            .filter_map(|r| r.strategy("staleguard"))
            .map(|s| s.relative_to_newest_only)
            .fold(0.0, f64::max);
        let (none, sg) = (count("none"), count("staleguard"));
        let share = 100.0 * sg as f64 / all.max(1) as f64;
        let _ = writeln!(
            out,
            "{corpus:<width$} {:>8} {:>11} {:>9} {share:>6.1}% {dearest:>18.3}",
            rs.len(),
            format!("{none}/{all}"),
            format!("{sg}/{all}"),
        );
    }
}

/// Every turn of every strategy of every session.
pub(super) fn csv(replays: &[SessionReplay]) -> String {
    let mut out = String::from(
        "session,turn,strategy,sent_bytes,read_bytes,written_bytes,uncached_bytes,cost,breakpoints,stale_refs,frozen_history_broken\n",
    );
    for r in replays {
        for s in &r.strategies {
            for t in &s.turns {
                let b = &t.bill;
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{:.1},{},{},{}",
                    r.session,
                    t.turn,
                    s.strategy,
                    b.sent_bytes,
                    b.read_bytes,
                    b.written_bytes,
                    b.uncached_bytes,
                    b.cost,
                    b.breakpoints,
                    t.stale_refs,
                    t.frozen_history_broken
                );
            }
        }
    }
    out
}

/// The cost of every turn for each strategy, as an SVG line chart.
pub(super) fn plot(r: &SessionReplay, path: &std::path::Path) -> Result<(), Failure> {
    use plotters::prelude::*;
    let fail =
        |e: &dyn std::fmt::Display| Failure::Message(format!("plot {}: {e}", path.display()));
    let costs = |s: &StrategyReplay| -> Vec<(usize, f64)> {
        s.turns.iter().map(|t| (t.turn, t.bill.cost)).collect()
    };
    let max = r
        .strategies
        .iter()
        .flat_map(|s| s.turns.iter().map(|t| t.bill.cost))
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("prompt-cache cost per model turn: {}", r.session),
            ("sans-serif", 20),
        )
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(72)
        .build_cartesian_2d(1..r.turns.max(2), 0.0..max * 1.1)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("turn")
        .y_desc("cost units (input bytes)")
        .draw()
        .map_err(|e| fail(&e))?;
    let colours = [RED, MAGENTA, GREEN, CYAN, BLUE];
    for (s, colour) in r.strategies.iter().zip(colours) {
        chart
            .draw_series(LineSeries::new(costs(s), colour.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(s.strategy)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))
}
