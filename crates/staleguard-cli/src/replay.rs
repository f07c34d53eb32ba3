//! `staleguard replay SESSION`: what each strategy sends to the model on every turn of a
//! recorded session, and what it costs in prompt-cache rewrites.

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;
use staleguard::adapter::read_request;
use staleguard::progress::Tracker;
use staleguard::projection::{self, Edit};
use staleguard::session::Session;
use staleguard::tools::BrowserTools;
use staleguard::transcript::Item;
use staleguard::{project_request, Config, RequestFormat};

use crate::Failure;

/// The strategies compared, in table order.
pub const STRATEGIES: [&str; 4] = [
    "none",
    "staleguard",
    "clear-oldest-3",
    "newest-only-placeholder",
];

/// What a strategy puts in place of an old result.
const PLACEHOLDER: &str = "[older tool result omitted]";

/// Options of a replay.
pub struct Options {
    pub facts: Vec<String>,
    /// Token count past which `clear-oldest-3` starts clearing.
    pub trigger_tokens: usize,
    pub read_ratio: f64,
    pub write_ratio: f64,
}

/// One strategy on one turn.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub turn: usize,
    pub strategy: &'static str,
    pub bytes: usize,
    pub tokens: usize,
    pub rewrite_bytes: usize,
    pub cost_units: f64,
    pub stale_refs: usize,
    pub facts_retained: usize,
    /// The first message (or input item) that differs from the previous turn's request.
    pub first_changed: Option<usize>,
    /// The first message of the live page state (`staleguard` only).
    pub live_message: Option<usize>,
}

/// A whole replay: every turn under every strategy.
#[derive(Debug, Clone, Serialize)]
pub struct Replay {
    pub format: &'static str,
    pub turns: usize,
    pub facts: usize,
    pub cells: Vec<Cell>,
}

impl Replay {
    /// Totals per strategy: sums, except facts, which are those of the last turn.
    pub fn totals(&self) -> Vec<Cell> {
        STRATEGIES
            .iter()
            .map(|&strategy| {
                let cells: Vec<&Cell> = self
                    .cells
                    .iter()
                    .filter(|c| c.strategy == strategy)
                    .collect();
                Cell {
                    turn: self.turns,
                    strategy,
                    bytes: cells.iter().map(|c| c.bytes).sum(),
                    tokens: cells.iter().map(|c| c.tokens).sum(),
                    rewrite_bytes: cells.iter().map(|c| c.rewrite_bytes).sum(),
                    cost_units: cells.iter().map(|c| c.cost_units).sum(),
                    stale_refs: cells.iter().map(|c| c.stale_refs).sum(),
                    facts_retained: cells.last().map_or(0, |c| c.facts_retained),
                    first_changed: None,
                    live_message: None,
                }
            })
            .collect()
    }
}

/// Replays `body`, the last request of a session.
pub fn replay(body: &str, options: &Options) -> Result<Replay, Failure> {
    let (_, format, _) = read_request(body, RequestFormat::Auto)?;
    let requests = turn_requests(body)?;
    let bpe = tiktoken_rs::o200k_base().map_err(|e| Failure::Message(format!("tokenizer: {e}")))?;
    let tokens = |s: &str| bpe.encode_ordinary(s).len();
    let mut cells = Vec::new();
    for strategy in STRATEGIES {
        let mut previous = String::new();
        for (turn, request) in requests.iter().enumerate() {
            let (sent, live_message) = apply(strategy, request, tokens(request), options)?;
            let common = common_prefix(&previous, &sent);
            let first_changed = first_changed(&previous, &sent);
            let (head, tail) = (tokens(&sent[..common]), tokens(&sent[common..]));
            cells.push(Cell {
                turn: turn + 1,
                strategy,
                bytes: sent.len(),
                tokens: head + tail,
                rewrite_bytes: sent.len() - common,
                cost_units: head as f64 * options.read_ratio + tail as f64 * options.write_ratio,
                stale_refs: stale_refs(&sent),
                facts_retained: facts_in(&sent, &options.facts),
                first_changed,
                live_message,
            });
            previous = sent;
        }
    }
    Ok(Replay {
        format: format.name(),
        turns: requests.len(),
        facts: options.facts.len(),
        cells,
    })
}

/// The request of every model turn: the messages (or input items) before each assistant
/// turn, then the whole body.
fn turn_requests(body: &str) -> Result<Vec<String>, Failure> {
    let v: Value = serde_json::from_str(body)?;
    let key = if v.get("messages").is_some_and(Value::is_array) {
        "messages"
    } else {
        "input"
    };
    let items = v[key].as_array().cloned().unwrap_or_default();
    let mut requests = Vec::new();
    for i in 0..items.len() {
        let starts_turn = is_assistant(&items[i]) && (i == 0 || !is_assistant(&items[i - 1]));
        if starts_turn {
            let mut prefix = v.clone();
            prefix[key] = Value::Array(items[..i].to_vec());
            requests.push(serde_json::to_string(&prefix)?);
        }
    }
    requests.push(serde_json::to_string(&v)?);
    Ok(requests)
}

fn is_assistant(item: &Value) -> bool {
    item["role"] == "assistant"
        || matches!(
            item["type"].as_str(),
            Some("function_call" | "custom_tool_call" | "reasoning")
        )
}

/// The request a strategy sends for `request`, and, for `staleguard`, the first message of
/// its live page state.
fn apply(
    strategy: &str,
    request: &str,
    tokens: usize,
    options: &Options,
) -> Result<(String, Option<usize>), Failure> {
    let on = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    if strategy == "staleguard" {
        let p = project_request(request, RequestFormat::Auto, &on)?;
        let live = p
            .report
            .results
            .iter()
            .filter(|r| r.status == staleguard::Status::Live)
            .map(|r| r.message)
            .min();
        return Ok((p.body, live));
    }
    let sent = match strategy {
        "newest-only-placeholder" => {
            let (wire, _, _) = read_request(request, RequestFormat::Auto)?;
            let tools = BrowserTools::new(&on.browser_tools);
            let session = Session::build(wire.transcript(), &tools, None);
            let mut plan = projection::plan(&session, on.receipt_max_bytes);
            plan.edits.retain(|e| !e.append);
            plan.edits
                .iter_mut()
                .for_each(|e| e.text = PLACEHOLDER.to_string());
            wire.write(&plan.edits)
        }
        "clear-oldest-3" if tokens > options.trigger_tokens => {
            let (wire, _, _) = read_request(request, RequestFormat::Auto)?;
            let results: Vec<usize> = wire
                .transcript()
                .items
                .iter()
                .enumerate()
                .filter(|(_, item)| matches!(item, Item::Result(_)))
                .map(|(i, _)| i)
                .collect();
            let old = results.len().saturating_sub(3);
            let edits: Vec<Edit> = results[..old]
                .iter()
                .map(|&item| Edit {
                    item,
                    text: PLACEHOLDER.to_string(),
                    append: false,
                })
                .collect();
            wire.write(&edits)
        }
        _ => request.to_string(),
    };
    Ok((sent, None))
}

/// The list of messages (or input items) of a request.
fn items(request: &str) -> Vec<Value> {
    let Ok(v) = serde_json::from_str::<Value>(request) else {
        return Vec::new();
    };
    let list = if v["messages"].is_array() {
        &v["messages"]
    } else {
        &v["input"]
    };
    list.as_array().cloned().unwrap_or_default()
}

/// The first item that is not the same in both requests (`None` on the first turn).
fn first_changed(previous: &str, sent: &str) -> Option<usize> {
    if previous.is_empty() {
        return None;
    }
    let (a, b) = (items(previous), items(sent));
    Some(a.iter().zip(&b).take_while(|(x, y)| x == y).count())
}

/// Bytes the two strings share at the start, at a char boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// Refs the request shows outside its newest page state that are not on the newest page.
/// The live state itself (with an incremental server, the last full tree and its diffs)
/// is the newest page as the model sees it.
fn stale_refs(request: &str) -> usize {
    let Ok((wire, _, _)) = read_request(request, RequestFormat::Auto) else {
        return 0;
    };
    let transcript = wire.transcript();
    let on = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    let tools = BrowserTools::new(&on.browser_tools);
    let steps = Session::build(transcript, &tools, None);
    let plan = projection::plan(&steps, on.receipt_max_bytes);
    let session = Tracker::new(on.max_repeats).replay(&steps, |_, _, _, _| {});
    let mut stale = HashSet::new();
    for r in plan
        .results
        .iter()
        .filter(|r| r.status != staleguard::Status::Live)
    {
        let Some(Item::Result(result)) = transcript.items.get(r.item) else {
            continue;
        };
        if let Some(obs) = staleguard::observation::parse(&result.text) {
            let gone = obs
                .refs
                .iter()
                .filter(|x| !session.page().refs.contains_key(x.id.as_ref()));
            stale.extend(gone.map(|x| x.id.to_string()));
        }
    }
    stale.len()
}

/// How many facts the request's tool results hold (the model's own words do not count).
fn facts_in(request: &str, facts: &[String]) -> usize {
    let Ok((wire, _, _)) = read_request(request, RequestFormat::Auto) else {
        return 0;
    };
    let text: String = wire
        .transcript()
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Result(r) => Some(r.text.as_ref()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let appended = appended_text(request);
    facts
        .iter()
        .filter(|f| text.contains(f.as_str()) || appended.contains(f.as_str()))
        .count()
}

/// The evidence and guidance parts staleguard appended, which the neutral view leaves out.
fn appended_text(request: &str) -> String {
    let Ok(v) = serde_json::from_str::<Value>(request) else {
        return String::new();
    };
    let mut out = String::new();
    collect_appendix(&v, &mut out);
    out
}

fn collect_appendix(v: &Value, out: &mut String) {
    match v {
        Value::String(s) if staleguard::appendix::is_appendix(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|i| collect_appendix(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect_appendix(i, out)),
        _ => {}
    }
}

/// The per-turn table and the totals table.
pub fn to_table(r: &Replay) -> String {
    let header = format!(
        "{:>4}  {:<24}  {:>9}  {:>8}  {:>9}  {:>10}  {:>5}  {:>5}\n",
        "turn", "strategy", "bytes", "tokens", "rewrite B", "cost units", "stale", "facts"
    );
    let row = |c: &Cell| {
        format!(
            "{:>4}  {:<24}  {:>9}  {:>8}  {:>9}  {:>10.1}  {:>5}  {:>5}\n",
            c.turn,
            c.strategy,
            c.bytes,
            c.tokens,
            c.rewrite_bytes,
            c.cost_units,
            c.stale_refs,
            format!("{}/{}", c.facts_retained, r.facts)
        )
    };
    let mut out = format!(
        "format: {}, {} turns\n\nper turn:\n{header}",
        r.format, r.turns
    );
    for turn in 1..=r.turns {
        r.cells
            .iter()
            .filter(|c| c.turn == turn)
            .for_each(|c| out.push_str(&row(c)));
    }
    out.push_str(&format!("\ntotals (facts: in the last request):\n{header}"));
    r.totals().iter().for_each(|c| out.push_str(&row(c)));
    out
}

pub fn to_csv(r: &Replay) -> String {
    let mut out = String::from(
        "turn,strategy,bytes,tokens,rewrite_bytes,cost_units,stale_refs,facts_retained\n",
    );
    for c in &r.cells {
        out.push_str(&format!(
            "{},{},{},{},{},{:.1},{},{}\n",
            c.turn,
            c.strategy,
            c.bytes,
            c.tokens,
            c.rewrite_bytes,
            c.cost_units,
            c.stale_refs,
            c.facts_retained
        ));
    }
    out
}

/// Tokens per turn for each strategy, as an SVG line chart.
pub fn plot(r: &Replay, path: &std::path::Path) -> Result<(), Failure> {
    use plotters::prelude::*;
    let fail =
        |e: &dyn std::fmt::Display| Failure::Message(format!("plot {}: {e}", path.display()));
    let max = r.cells.iter().map(|c| c.tokens).max().unwrap_or(1).max(1);
    let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption("tokens sent per model turn", ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(1..r.turns.max(2), 0..max + max / 10)
        .map_err(|e| fail(&e))?;
    chart
        .configure_mesh()
        .x_desc("turn")
        .y_desc("tokens (o200k_base)")
        .draw()
        .map_err(|e| fail(&e))?;
    let colours = [RED, GREEN, BLUE, MAGENTA];
    for (strategy, colour) in STRATEGIES.iter().zip(colours) {
        let points: Vec<(usize, usize)> = r
            .cells
            .iter()
            .filter(|c| c.strategy == *strategy)
            .map(|c| (c.turn, c.tokens))
            .collect();
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))
            .map_err(|e| fail(&e))?
            .label(*strategy)
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
