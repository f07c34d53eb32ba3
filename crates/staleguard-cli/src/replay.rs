//! `staleguard replay SESSION...`: what each strategy costs, turn by turn, as a provider's
//! prompt cache bills it (SPEC 9 "Measure"), and whether the facts are where they are needed.
//!
//! Every model turn of a recorded session is rebuilt (the messages before each assistant
//! turn, then the whole body), sent through each strategy, rendered in cache order
//! ([`render`]) and billed against the cache the strategy's earlier turns left
//! ([`cache`]). The reference for the measure is `tools/cachecost.py`; the tests
//! compare with it.

mod cache;
mod facts;
mod follow;
mod lean;
mod render;
mod report;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use staleguard::{project, Config, Edit, LivePage, Memo, Options, Request, RequestFormat, Status};

pub(crate) use cache::{Bill, Model, Pricing};
pub(crate) use facts::Need;
pub(crate) use follow::Way;

use crate::Failure;

/// The strategies compared, in table order. `none` and `newest-only` are what the others
/// are measured against.
/// `staleguard-lean` is staleguard with the live page lean (SPEC 2 "Lean live page").
pub(crate) const STRATEGIES: [&str; 5] = [
    "none",
    "newest-only",
    "staleguard",
    "staleguard-lean",
    "clear-oldest-3",
];

/// What `newest-only` puts in place of every older observation: the reference's text.
const PLACEHOLDER: &str = "[older browser observation omitted; its refs are stale]";
/// What `clear-oldest-3` puts in place of an old tool result.
const CLEARED: &str = "[older tool result omitted]";

/// `staleguard replay`'s arguments.
#[derive(clap::Args)]
pub(crate) struct ReplayArgs {
    /// Recorded sessions: each the last request body of a session.
    #[arg(required = true)]
    sessions: Vec<PathBuf>,
    /// Facts to check, one a line (for every session given).
    #[arg(long, value_name = "FILE", conflicts_with = "facts_dir")]
    facts: Option<PathBuf>,
    /// A folder of facts files: each session's is `<scenario>.txt`, the scenario being its
    /// file name up to the first dot (`order.openai.json`: `order.txt`).
    #[arg(long, value_name = "DIR")]
    facts_dir: Option<PathBuf>,
    /// prefix: the common prefix with the previous request is read; breakpoints: Anthropic's
    /// `cache_control` rules; auto: breakpoints for Anthropic bodies, prefix otherwise.
    #[arg(long, value_name = "MODEL", default_value = "auto")]
    cache_model: String,
    /// Lifetime of a cache entry in seconds (a breakpoint's own `ttl` wins).
    #[arg(long, default_value_t = 300)]
    cache_ttl_secs: u64,
    /// Seconds between turns. Recordings carry no clocks; 0 puts every turn within the TTL.
    #[arg(long, default_value_t = 0)]
    turn_spacing_secs: u64,
    /// recorded: the breakpoints the bodies carry. last-block: also one on the last content
    /// block of the last message of every turn (Anthropic bodies), as Claude Code marks it;
    /// system-and-last-block: and one on the last system block.
    #[arg(long, value_name = "KIND", default_value = "recorded")]
    client_breakpoints: String,
    /// Tokens past which `clear-oldest-3` starts clearing.
    #[arg(long, default_value_t = 100_000)]
    trigger_tokens: usize,
    /// Cost of a byte read from the cache, relative to an input byte.
    #[arg(long, default_value_t = 0.1)]
    read_ratio: f64,
    /// Cost of a byte written to the cache, relative to an input byte.
    #[arg(long, default_value_t = 1.25)]
    write_ratio: f64,
    /// Config file for the `staleguard` strategy (default: ./staleguard.toml when present).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Also print every turn.
    #[arg(long)]
    per_turn: bool,
    /// Write what each strategy sends on every turn into this folder, as
    /// `<session file>/turn-<NN>.<strategy>.json`.
    #[arg(long, value_name = "DIR")]
    save_requests: Option<PathBuf>,
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Every turn of every strategy as CSV.
    #[arg(long)]
    csv: bool,
    /// Draw the cost of each turn for each strategy into this SVG file (one session).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Replay as if the MCP guard stood in front of the browser: every request offers its
    /// `browser_history` tool, as the guard adds it to the server's tools.
    #[arg(long)]
    guard: bool,
}

/// Breakpoints a simulated client puts on every turn's request before it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClientMarks {
    /// None beyond those the recorded bodies carry.
    Recorded,
    /// The last content block of the last message.
    LastBlock,
    /// That, and the last block of the system prompt.
    SystemAndLastBlock,
}

/// Which cost model bills a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ModelChoice {
    Auto,
    Fixed(Model),
}

impl ModelChoice {
    fn parse(s: &str) -> Result<ModelChoice, Failure> {
        match s {
            "auto" => Ok(ModelChoice::Auto),
            "prefix" => Ok(ModelChoice::Fixed(Model::Prefix)),
            "breakpoints" => Ok(ModelChoice::Fixed(Model::Breakpoints)),
            other => Err(Failure::Message(format!(
                "--cache-model {other:?}: expected prefix, breakpoints or auto"
            ))),
        }
    }

    fn resolve(self, format: RequestFormat) -> Model {
        match self {
            ModelChoice::Fixed(model) => model,
            ModelChoice::Auto if format == RequestFormat::Anthropic => Model::Breakpoints,
            ModelChoice::Auto => Model::Prefix,
        }
    }
}

/// Options of a replay.
pub(crate) struct ReplayOptions {
    pub facts: Vec<String>,
    pub model: ModelChoice,
    pub pricing: Pricing,
    /// Breakpoints a client would add to every turn (Anthropic bodies).
    pub client_marks: ClientMarks,
    pub trigger_tokens: usize,
    pub config: Config,
    /// Where to write each strategy's request of every turn.
    pub save_requests: Option<PathBuf>,
    /// Every request offers the guard's `browser_history` tool.
    pub guard: bool,
}

/// One strategy on one turn.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Turn {
    pub turn: usize,
    #[serde(flatten)]
    pub bill: Bill,
    /// Refs the request shows that are on no page but the newest.
    pub stale_refs: usize,
    /// The request is not byte-identical to the previous turn's up to the previous turn's
    /// live page state or newest browser result (SPEC 9 C1), nor broken only where it
    /// collapses pages that waited (C5).
    pub frozen_history_broken: bool,
    /// The request collapses pages whose collapse waited (C5): its one allowed break.
    pub waited_collapses_done: bool,
}

/// One strategy over a session.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StrategyReplay {
    pub strategy: &'static str,
    pub total: Bill,
    pub relative_to_none: f64,
    pub relative_to_newest_only: f64,
    pub stale_refs: usize,
    /// Turns (from 1) whose request broke frozen history.
    pub frozen_history_broken: Vec<usize>,
    /// Turns (from 1) whose request collapsed pages that had waited (C5), at one place.
    pub waited_collapses_done: Vec<usize>,
    pub turns: Vec<Turn>,
}

/// One fact, and whether each strategy's request that needs it holds it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FactCheck {
    pub fact: String,
    pub needed_in: Need,
    /// The turn (from 1) whose request must hold it.
    pub turn: usize,
    /// How many messages (or items) of the session that request carries.
    pub request_messages: usize,
    /// Per strategy, in table order.
    pub present: Vec<(&'static str, bool)>,
    /// The staleguard strategies whose request lacks the fact, and the call it names that
    /// reaches it ([`follow`]); a strategy not listed here nor in `present` lost it.
    pub one_call: Vec<(&'static str, Way)>,
}

/// A whole session under every strategy.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SessionReplay {
    pub session: String,
    pub format: &'static str,
    pub cache_model: Model,
    pub pricing: Pricing,
    pub turns: usize,
    pub strategies: Vec<StrategyReplay>,
    pub facts: Vec<FactCheck>,
    /// The pages `staleguard-lean` sent lean, each measured the first turn it did.
    pub lean_pages: Vec<lean::LeanPage>,
    pub warnings: Vec<String>,
}

impl SessionReplay {
    pub(crate) fn strategy(&self, name: &str) -> Option<&StrategyReplay> {
        self.strategies.iter().find(|s| s.strategy == name)
    }
}

/// Runs `staleguard replay`.
pub(crate) fn run(args: ReplayArgs) -> Result<(), Failure> {
    if args.plot.is_some() && args.sessions.len() != 1 {
        return Err(Failure::Message(
            "--plot draws one session: give one".to_string(),
        ));
    }
    let client_marks = match args.client_breakpoints.as_str() {
        "recorded" => ClientMarks::Recorded,
        "last-block" => ClientMarks::LastBlock,
        "system-and-last-block" => ClientMarks::SystemAndLastBlock,
        other => {
            return Err(Failure::Message(format!(
                "--client-breakpoints {other:?}: expected recorded, last-block or system-and-last-block"
            )))
        }
    };
    let mut config = crate::load_config(args.config.as_deref())?.config;
    config.browser_history_compaction = true;
    let mut options = ReplayOptions {
        facts: Vec::new(),
        model: ModelChoice::parse(&args.cache_model)?,
        pricing: Pricing {
            read: args.read_ratio,
            write: args.write_ratio,
            ttl_secs: args.cache_ttl_secs,
            spacing_secs: args.turn_spacing_secs,
        },
        client_marks,
        trigger_tokens: args.trigger_tokens,
        config,
        save_requests: None,
        guard: args.guard,
    };
    let mut replays = Vec::new();
    for path in &args.sessions {
        options.facts = facts_for(path, args.facts.as_deref(), args.facts_dir.as_deref())?;
        let file = path.file_name().unwrap_or_default();
        options.save_requests = args.save_requests.as_ref().map(|dir| dir.join(file));
        let body = crate::read_file(path)?;
        let replay = replay(&body, &session_name(path), &options).map_err(|e| prefixed(path, e))?;
        replays.push(replay);
    }
    if let (Some(svg), Some(replay)) = (&args.plot, replays.first()) {
        report::plot(replay, svg)?;
    }
    let text = if args.json {
        serde_json::to_string_pretty(&serde_json::json!({ "sessions": &replays }))? + "\n"
    } else if args.csv {
        report::csv(&replays)
    } else {
        report::tables(&replays, args.per_turn)
    };
    crate::write_stdout(text.as_bytes())
}

fn prefixed(path: &Path, e: Failure) -> Failure {
    match e {
        Failure::Message(m) => Failure::Message(format!("{}: {m}", path.display())),
        other => other,
    }
}

/// The session as tables name it: its folder and file name.
fn session_name(path: &Path) -> String {
    let file = path.file_name().unwrap_or_default().to_string_lossy();
    match path.parent().and_then(Path::file_name) {
        Some(dir) => format!("{}/{file}", dir.to_string_lossy()),
        None => file.to_string(),
    }
}

fn facts_for(path: &Path, file: Option<&Path>, dir: Option<&Path>) -> Result<Vec<String>, Failure> {
    let file = match (file, dir) {
        (Some(file), _) => file.to_path_buf(),
        (None, Some(dir)) => {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let scenario = name.split('.').next().unwrap_or_default();
            let file = dir.join(format!("{scenario}.txt"));
            if !file.is_file() {
                return Ok(Vec::new());
            }
            file
        }
        (None, None) => return Ok(Vec::new()),
    };
    Ok(crate::read_file(&file)?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// One turn's request, and how many messages (or items) of the session it carries.
struct TurnRequest {
    start: usize,
    body: String,
}

/// Replays `body`, the last request of a session.
pub(crate) fn replay(
    body: &str,
    name: &str,
    options: &ReplayOptions,
) -> Result<SessionReplay, Failure> {
    let format = Request::read(body, RequestFormat::Auto)?.format();
    let mut session: Value = serde_json::from_str(body)?;
    if options.guard {
        offer_history(&mut session, format);
    }
    let model = options.model.resolve(format);
    let marks = match format {
        RequestFormat::Anthropic => options.client_marks,
        _ => ClientMarks::Recorded,
    };
    let requests = turn_requests(&session, marks)?;
    let starts: Vec<usize> = requests.iter().map(|r| r.start).collect();
    let placed = facts::place(&session, &options.facts, &starts);
    let bpe = tiktoken_rs::o200k_base().map_err(|e| Failure::Message(format!("tokenizer: {e}")))?;
    let memo = Memo::default();
    let markers = match model {
        Model::Prefix => render::Markers::AsReference,
        Model::Breakpoints => render::Markers::Stripped,
    };
    let mut runs: Vec<Run> = STRATEGIES
        .iter()
        .map(|_| Run::new(model, options.pricing))
        .collect();
    let mut facts = fact_checks(&placed, &starts);
    let mut warnings = Vec::new();
    let mut lean_pages = Vec::new();
    for (t, request) in requests.iter().enumerate() {
        let tokens = bpe.encode_ordinary(&request.body).len();
        let sent = send(&request.body, tokens, options, &memo)?;
        let lean_body = &sent.bodies[3];
        lean::pages(
            t,
            &request.body,
            lean_body,
            &sent.lean,
            &bpe,
            &mut lean_pages,
        )?;
        for ((strategy, run), body) in STRATEGIES.iter().zip(&mut runs).zip(&sent.bodies) {
            save(options.save_requests.as_deref(), t, strategy, body)?;
            let value: Value = serde_json::from_str(body)?;
            let rendered = render::render(&value, markers);
            // Only staleguard's own requests collapse waiting pages (C5).
            let batch = sent.batch.filter(|_| strategy.starts_with("staleguard"));
            let frozen = Frozen {
                frozen: sent.frozen,
                batch,
            };
            let turn = run.turn(t, &rendered, frozen, stale_refs(body, &options.config));
            warnings.extend(too_many_breakpoints(turn, strategy));
            let text = facts::tool_results_text(&value);
            let follower = sent.follower(strategy, &request.body, body, options, &memo);
            // What the calls the request names return, made once when a fact is missing.
            let mut reachable = None;
            for (check, p) in facts.iter_mut().zip(&placed).filter(|(_, p)| p.turn == t) {
                let present = text.contains(p.fact.as_str());
                check.present.push((strategy, present));
                if let Some(turn) = follower.as_ref().filter(|_| !present) {
                    let reads = match &reachable {
                        Some(reads) => reads,
                        None => reachable.insert(follow::reachable(turn)?),
                    };
                    let way = follow::way_to(reads, &p.fact);
                    check.one_call.extend(way.map(|w| (*strategy, w)));
                }
            }
        }
    }
    Ok(SessionReplay {
        session: name.to_string(),
        format: format.name(),
        cache_model: model,
        pricing: options.pricing,
        turns: requests.len(),
        strategies: summarise(runs),
        facts,
        lean_pages,
        warnings,
    })
}

/// A check per fact, to be filled in turn by turn.
fn fact_checks(placed: &[facts::Placed], starts: &[usize]) -> Vec<FactCheck> {
    placed
        .iter()
        .map(|p| FactCheck {
            fact: p.fact.clone(),
            needed_in: p.need,
            turn: p.turn + 1,
            request_messages: starts.get(p.turn).copied().unwrap_or_default(),
            present: Vec::new(),
            one_call: Vec::new(),
        })
        .collect()
}

/// Anthropic answers a request with more than 4 breakpoints with an error; the replay bills
/// it with the first 4 and says so.
fn too_many_breakpoints(turn: &Turn, strategy: &str) -> Option<String> {
    let n = turn.bill.breakpoints;
    (n > cache::MAX_BREAKPOINTS).then(|| {
        format!(
            "turn {} ({strategy}): {n} cache_control breakpoints; Anthropic rejects more than {max} (billed with the first {max})",
            turn.turn,
            max = cache::MAX_BREAKPOINTS
        )
    })
}

/// Writes a strategy's request of turn `t` into `dir`, when there is one.
fn save(dir: Option<&Path>, t: usize, strategy: &str, body: &str) -> Result<(), Failure> {
    let Some(dir) = dir else {
        return Ok(());
    };
    let cannot =
        |e: std::io::Error| Failure::Message(format!("cannot write {}: {e}", dir.display()));
    std::fs::create_dir_all(dir).map_err(cannot)?;
    let file = dir.join(format!("turn-{:02}.{strategy}.json", t + 1));
    std::fs::write(&file, body).map_err(cannot)
}

/// One strategy's turns so far, and the cache they left.
struct Run {
    cache: cache::Cache,
    previous: Option<(render::Rendered, usize)>,
    turns: Vec<Turn>,
}

impl Run {
    fn new(model: Model, pricing: Pricing) -> Run {
        Run {
            cache: cache::Cache::new(model, pricing),
            previous: None,
            turns: Vec::new(),
        }
    }

    /// Bills turn `t`; `frozen` says where its next request may first differ (C1) and
    /// where this one collapses waiting pages (C5).
    fn turn(
        &mut self,
        t: usize,
        rendered: &render::Rendered,
        frozen: Frozen,
        stale: usize,
    ) -> &Turn {
        let bill = self.cache.bill(t, rendered);
        let broken = self.previous.as_ref().is_some_and(|(prev, before)| {
            let start = |message: usize| {
                let at = prev.message_starts.get(message).copied();
                at.unwrap_or(prev.bytes.len())
            };
            let need = frozen
                .batch
                .map_or(start(*before), |b| start(*before).min(start(b)));
            cache::common_prefix(&prev.bytes, &rendered.bytes) < need
        });
        self.previous = Some((rendered.clone(), frozen.frozen));
        self.turns.push(Turn {
            turn: t + 1,
            bill,
            stale_refs: stale,
            frozen_history_broken: broken,
            waited_collapses_done: frozen.batch.is_some(),
        });
        self.turns.last().expect("just pushed")
    }
}

fn summarise(runs: Vec<Run>) -> Vec<StrategyReplay> {
    let totals: Vec<Bill> = runs
        .iter()
        .map(|run| {
            let mut total = Bill::default();
            run.turns.iter().for_each(|t| total.add(&t.bill));
            total
        })
        .collect();
    let ratio = |cost: f64, base: f64| if base > 0.0 { cost / base } else { 0.0 };
    STRATEGIES
        .iter()
        .zip(runs)
        .zip(&totals)
        .map(|((&strategy, run), total)| StrategyReplay {
            strategy,
            total: *total,
            relative_to_none: ratio(total.cost, totals[0].cost),
            relative_to_newest_only: ratio(total.cost, totals[1].cost),
            stale_refs: run.turns.iter().map(|t| t.stale_refs).sum(),
            frozen_history_broken: turns_where(&run, |t| t.frozen_history_broken),
            waited_collapses_done: turns_where(&run, |t| t.waited_collapses_done),
            turns: run.turns,
        })
        .collect()
}

/// The turns (from 1) of `run` for which `pick` holds.
fn turns_where(run: &Run, pick: fn(&Turn) -> bool) -> Vec<usize> {
    run.turns
        .iter()
        .filter(|t| pick(t))
        .map(|t| t.turn)
        .collect()
}

/// The request of every model turn: the messages (or input items) before each assistant
/// turn, then the whole body, each with the client breakpoints `marks` asks for.
fn turn_requests(session: &Value, marks: ClientMarks) -> Result<Vec<TurnRequest>, Failure> {
    let key = ["messages", "contents"]
        .into_iter()
        .find(|key| session.get(key).is_some_and(Value::is_array))
        .unwrap_or("input");
    let items = facts::items(session);
    let mut starts: Vec<usize> = (0..items.len())
        .filter(|&i| is_assistant(&items[i]) && (i == 0 || !is_assistant(&items[i - 1])))
        .collect();
    starts.push(items.len());
    starts
        .into_iter()
        .map(|start| {
            let mut request = session.clone();
            request[key] = Value::Array(items[..start].to_vec());
            if marks != ClientMarks::Recorded {
                if let Some(last) = request[key].as_array_mut().and_then(|m| m.last_mut()) {
                    mark_last_block(last.get_mut("content"));
                }
            }
            if marks == ClientMarks::SystemAndLastBlock {
                mark_last_block(request.get_mut("system"));
            }
            Ok(TurnRequest {
                start,
                body: serde_json::to_string(&request)?,
            })
        })
        .collect()
}

fn is_assistant(item: &Value) -> bool {
    item["role"] == "assistant"
        || item["role"] == "model"
        || matches!(
            item["type"].as_str(),
            Some("function_call" | "custom_tool_call" | "reasoning")
        )
}

/// Puts a `cache_control` breakpoint on the last block of `content` (a string becomes one
/// text block, which renders alike), unless it has one.
fn mark_last_block(content: Option<&mut Value>) {
    let Some(content) = content else {
        return;
    };
    if let Value::String(text) = content {
        *content = serde_json::json!([{"type": "text", "text": text}]);
    }
    if let Some(Value::Object(block)) = content.as_array_mut().and_then(|b| b.last_mut()) {
        block
            .entry("cache_control")
            .or_insert_with(|| serde_json::json!({"type": "ephemeral"}));
    }
}

/// What each strategy sends for one turn's request, in [`STRATEGIES`] order, and the
/// message before which the next turn's request must not change (C1: the start of the live
/// page state or of the newest browser result, whichever comes first).
struct Sent {
    bodies: [String; 5],
    /// The results of the staleguard strategy's request, as it reports them.
    results: Vec<staleguard::ResultReport>,
    /// The results of the lean strategy's request, as it reports them.
    lean: Vec<staleguard::ResultReport>,
    lean_config: Config,
    frozen: usize,
    /// The message of the first waiting page staleguard's request collapses (C5).
    batch: Option<usize>,
}

/// Where a turn's request may differ from the previous one's: from the message the previous
/// turn froze (`frozen`), or from the message of the pages whose collapse waited (`batch`).
#[derive(Clone, Copy)]
struct Frozen {
    frozen: usize,
    batch: Option<usize>,
}

fn send(
    request: &str,
    tokens: usize,
    options: &ReplayOptions,
    memo: &Memo,
) -> Result<Sent, Failure> {
    let with_memo = Options {
        memo: Some(memo),
        ..Options::default()
    };
    let projected = project(request, RequestFormat::Auto, &options.config, with_memo)?;
    let lean_config = Config {
        live_page: LivePage::Lean,
        ..options.config.clone()
    };
    let lean = project(request, RequestFormat::Auto, &lean_config, with_memo)?;
    let lean_results = lean.report().results.clone();
    let results = &projected.report().results;
    let live = results
        .iter()
        .filter(|r| r.status == Status::Live)
        .map(|r| r.message);
    let newest = results.last().map(|r| r.message);
    let frozen = match live.chain(newest).min() {
        Some(message) => message,
        None => facts::items(&serde_json::from_str(request)?).len(),
    };
    // newest-only replaces every older observation, waiting ones too.
    let older: Vec<usize> = results
        .iter()
        .filter(|r| matches!(r.status, Status::Collapsed | Status::Waiting))
        .map(|r| r.item)
        .collect();
    let batch = projected.report().batch_result().map(|r| r.message);
    let results = results.clone();
    Ok(Sent {
        bodies: [
            request.to_string(),
            replace(request, &older, PLACEHOLDER)?,
            projected.body.into_string(),
            lean.body.into_string(),
            clear_oldest(request, tokens, options.trigger_tokens)?,
        ],
        results,
        lean: lean_results,
        lean_config,
        frozen,
        batch,
    })
}

impl Sent {
    /// The follower of a staleguard strategy's request of this turn; `None` for the others.
    fn follower<'a>(
        &'a self,
        strategy: &str,
        original: &'a str,
        projected: &'a str,
        options: &'a ReplayOptions,
        memo: &'a Memo,
    ) -> Option<follow::Turn<'a>> {
        let (results, config) = match strategy {
            "staleguard" => (&self.results, &options.config),
            "staleguard-lean" => (&self.lean, &self.lean_config),
            _ => return None,
        };
        Some(follow::Turn {
            original,
            projected,
            results,
            config,
            memo,
        })
    }
}

/// Adds the MCP guard's `browser_history` tool to the tools of `session` (`--guard`),
/// declared as `format` declares a tool and named as its browser tools are (Claude Code's
/// `mcp__playwright__` prefix).
fn offer_history(session: &mut Value, format: RequestFormat) {
    let mcp = staleguard_mcp::history::tool_definition();
    let tools = session.pointer("/tools").and_then(Value::as_array);
    let prefix = tools
        .into_iter()
        .flatten()
        .filter_map(|t| {
            let name = t.pointer("/function/name").or_else(|| t.get("name"))?;
            let name = name.as_str()?;
            Some(&name[..name.rfind("browser_")?])
        })
        .next()
        .unwrap_or_default();
    let name = format!("{prefix}{}", staleguard::HISTORY_TOOL);
    let (description, schema) = (&mcp["description"], &mcp["inputSchema"]);
    let tool = match format {
        RequestFormat::Anthropic => {
            serde_json::json!({"name": name, "description": description, "input_schema": schema})
        }
        RequestFormat::Responses => serde_json::json!({"type": "function", "name": name,
            "description": description, "parameters": schema}),
        RequestFormat::Gemini => serde_json::json!({"functionDeclarations": [
            {"name": name, "description": description, "parameters": schema}]}),
        _ => serde_json::json!({"type": "function", "function": {"name": name,
            "description": description, "parameters": schema}}),
    };
    let root = match session
        .pointer("/request")
        .filter(|_| format == RequestFormat::Gemini)
    {
        Some(_) => &mut session["request"],
        None => session,
    };
    let Some(root) = root.as_object_mut() else {
        return;
    };
    let tools = root
        .entry("tools")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(tools) = tools.as_array_mut() {
        tools.push(tool);
    }
}

/// `request` with the results at transcript `items` replaced by `text`.
fn replace(request: &str, items: &[usize], text: &str) -> Result<String, Failure> {
    let wire = Request::read(request, RequestFormat::Auto)?;
    let edits: Vec<Edit> = items
        .iter()
        .map(|&item| Edit {
            item,
            text: text.into(),
            append: false,
        })
        .collect();
    Ok(wire.write(&edits))
}

/// `clear-oldest-3`: once the request passes `trigger` tokens, every tool result but the
/// newest 3 is cleared.
fn clear_oldest(request: &str, tokens: usize, trigger: usize) -> Result<String, Failure> {
    if tokens <= trigger {
        return Ok(request.to_string());
    }
    let wire = Request::read(request, RequestFormat::Auto)?;
    let results: Vec<usize> = wire.tool_results().map(|(i, _)| i).collect();
    let old = &results[..results.len().saturating_sub(3)];
    replace(request, old, CLEARED)
}

/// Refs the request shows outside its newest page state that are not on the newest page
/// ([`Request::stale_refs`]); none for a body that cannot be read.
fn stale_refs(request: &str, config: &Config) -> usize {
    Request::read(request, RequestFormat::Auto).map_or(0, |r| r.stale_refs(config))
}
