//! The `staleguard` command as a library: [`run`] takes the command line and returns the exit
//! code. The binary is a call of it, and so is the console script of the Python wheel
//! (`bindings/python`), so both run the same code and behave the same.

mod body;
use body::read_file;
pub mod inspect;
mod mcp;
pub mod panics;
mod proxy;
mod replay;

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use staleguard::{
    project, Config, ConfigError, Engine, EvidenceItem, Options, Projection, RequestFormat, Verdict,
};

/// The bundled recordings that `demo` runs: a real @playwright/mcp 0.0.41 session, as an
/// OpenAI Chat and as an Anthropic Messages request.
const DEMO_OPENAI: &str = include_str!("../../../fixtures/demo/long_page.openai.json");
const DEMO_ANTHROPIC: &str = include_str!("../../../fixtures/demo/long_page.anthropic.json");

#[derive(Parser)]
#[command(
    name = "staleguard",
    version,
    about = "Only the newest browser observation is real."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Project a request body: collapse every browser observation but the newest.
    Project {
        #[command(flatten)]
        input: InputArgs,
    },
    /// Show every browser result of a request body and what projection does with it.
    Inspect {
        #[command(flatten)]
        input: InputArgs,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run a bundled real recording through `project` and `inspect`.
    Demo {
        /// Which request format to show: openai or anthropic.
        #[arg(long, default_value = "openai")]
        format: String,
    },
    /// What each strategy costs on every model turn of recorded sessions, as a provider's
    /// prompt cache bills it, and whether the facts are where they are needed.
    Replay(replay::ReplayArgs),
    /// A drop-in HTTP proxy for OpenAI, Anthropic and Gemini APIs: point an agent's base URL here.
    Proxy(proxy::ProxyArgs),
    /// Read back the observations of a request body (SPEC 6): list them, or print one by the
    /// ID its receipt shows, with every ref neutralised, under a banner that says it is stale.
    Archive {
        #[command(flatten)]
        input: InputArgs,
        /// The observation ID (8 hex digits, as receipts and the list show it).
        #[arg(long)]
        id: Option<String>,
        /// Only these lines of it, as a fold marker of a lean page names them: `120-158`.
        #[arg(long, requires = "id", value_name = "A-B")]
        lines: Option<String>,
    },
    /// Guard a browser MCP server: `staleguard mcp -- npx @playwright/mcp --headless`.
    /// Speaks MCP on standard input and output, refuses stale refs and repeated submissions
    /// before they reach the browser, and adds a read-only `browser_history` tool.
    Mcp(mcp::McpArgs),
    /// Ask the guard about one proposed browser call, given the request it would follow.
    /// Exits 0 to allow and 3 to refuse, with the refusal text on standard output.
    CheckCall {
        /// The call as the request format writes it: an OpenAI `tool_calls` entry, an
        /// Anthropic `tool_use` block or a Responses `function_call` item.
        #[arg(long, value_name = "JSON")]
        call: String,
        #[command(flatten)]
        input: InputArgs,
    },
}

#[derive(clap::Args)]
struct InputArgs {
    /// Request body file; `-` or absent reads standard input.
    input: Option<PathBuf>,
    /// Request format: auto, openai, anthropic, responses or gemini.
    #[arg(long, default_value = "auto")]
    format: String,
    /// Config file (default: ./staleguard.toml when it exists).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Evidence items to keep: a JSON array of {"source_url", "observation", "quote"}.
    /// Each must ground in page text of the request; the rest are dropped and reported.
    #[arg(long, value_name = "FILE")]
    evidence: Option<PathBuf>,
}

/// A failure the user can act on: printed as one line, exit code 2; or an exit code whose
/// message is already written.
pub(crate) enum Failure {
    Message(String),
    Exit(u8),
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Message(e.to_string())
    }
}

/// Runs the `staleguard` command with `args` (the program name first, as `std::env::args_os`
/// gives it) and returns its exit code: 0, 2 for an error it printed to standard error (clap
/// uses 2 for a bad command line too), or a command's own code (3: `check-call` refused).
/// It writes to the process's standard output and error, as the binary does; `mcp` ends the
/// process itself when its server exits, with the server's code.
pub fn run<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let code = match Cli::try_parse_from(args) {
        // --help and --version are "errors" that print to standard output and exit 0.
        Err(e) => {
            let _ = e.print();
            u8::try_from(e.exit_code()).unwrap_or(2)
        }
        Ok(cli) => match contained(cli) {
            Ok(Ok(())) => 0,
            Ok(Err(Failure::Message(message))) => {
                eprintln!("staleguard: error: {message}");
                2
            }
            Ok(Err(Failure::Exit(code))) => code,
            Err(panicked) => {
                eprintln!("staleguard: {panicked}");
                INTERNAL_ERROR
            }
        },
    };
    // A binary's runtime flushes standard output at exit; a host process (Python) does not
    // know Rust's buffer.
    let _ = std::io::stdout().flush();
    code
}

/// Runs the command; a panic in it is an internal error. The servers (`proxy`, `mcp`) contain
/// their own per request, and report one by its place alone (a server's log must not get
/// request text), so they run outside.
fn contained(cli: Cli) -> Result<Result<(), Failure>, panics::Panicked> {
    panics::install();
    match cli.command {
        Command::Proxy(_) | Command::Mcp(_) => Ok(dispatch(cli)),
        _ => panics::contain(|| dispatch(cli)),
    }
}

fn dispatch(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Project { input } => {
            let (body, format, config) = load(&input)?;
            let explicit = load_evidence(&input)?;
            let options = Options {
                explicit: &explicit,
                ..Options::default()
            };
            let projected = project(&body, format, &config, options)?;
            write_stdout(projected.body.as_bytes())
        }
        Command::Inspect { input, json } => {
            let (body, format, config) = load(&input)?;
            let evidence = load_evidence(&input)?;
            let options = Options {
                explicit: &evidence,
                verdicts: true,
                ..Options::default()
            };
            let projected = project(&body, format, &config, options)?;
            let report = inspect::Report::new(&body, &projected);
            let text = if json {
                report.to_json()
            } else {
                report.to_table()
            };
            write_stdout(text.as_bytes())
        }
        Command::Demo { format } => demo(&format),
        Command::CheckCall { call, input } => check_call(&call, &input),
        Command::Proxy(args) => proxy::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Archive { input, id, lines } => archive(&input, id.as_deref(), lines.as_deref()),
        Command::Replay(args) => replay::run(args),
    }
}

/// Exit code for a bug in staleguard (a panic), `EX_SOFTWARE` of sysexits.h.
pub const INTERNAL_ERROR: u8 = 70;

/// Exit code for a refused call.
const REFUSED: u8 = 3;

fn check_call(call: &str, input: &InputArgs) -> Result<(), Failure> {
    let (body, _, config) = load(input)?;
    // The body's format is told from the body, whatever --format says.
    let verdict = match Engine::new(config).check_proposed(&body, RequestFormat::Auto, call) {
        Ok(verdict) => verdict,
        // The call's own error names the flag it came in.
        Err(staleguard::Error::Call(why)) => return Err(Failure::Message(format!("--{why}"))),
        Err(e) => return Err(e.into()),
    };
    match verdict {
        Verdict::Allow { note } => write_stdout(
            format!(
                "allow{}\n",
                note.map(|n| format!(": {n}")).unwrap_or_default()
            )
            .as_bytes(),
        ),
        Verdict::Refuse { message, .. } => {
            write_stdout(format!("{message}\n").as_bytes())?;
            Err(Failure::Exit(REFUSED))
        }
    }
}

/// Reads the body and config; compaction is on for these commands.
fn load(args: &InputArgs) -> Result<(body::Body, RequestFormat, Config), Failure> {
    let format: RequestFormat = args.format.parse()?;
    let mut config = load_config(args.config.as_deref())?.config;
    config.browser_history_compaction = true;
    let body = body::read_body(args.input.as_deref())?;
    Ok((body, format, config))
}

fn archive(input: &InputArgs, id: Option<&str>, lines: Option<&str>) -> Result<(), Failure> {
    let (body, format, config) = load(input)?;
    let (archive, now) = staleguard::Request::read(&body, format)?.archive(&config);
    let Some(id) = id.map(str::trim) else {
        return write_stdout(format!("{}\n", archive.list(now)).as_bytes());
    };
    let unknown = || {
        Failure::Message(format!(
            "no observation {id:?} in the request; `staleguard archive` without --id lists them"
        ))
    };
    let old = match lines {
        None => archive.read_back(id, now).ok_or_else(unknown)?,
        Some(lines) => {
            archive.read_back(id, now).ok_or_else(unknown)?;
            let range = staleguard_mcp::history::line_range(&lines.into());
            let part = range.and_then(|(first, last)| archive.read_lines(id, now, first, last));
            part.ok_or_else(|| {
                Failure::Message(format!(
                    "--lines {lines:?}: expected lines of observation {id} such as 12-40, as a fold marker names them"
                ))
            })?
        }
    };
    let end = if old.text.ends_with('\n') { "" } else { "\n" };
    write_stdout(format!("{}\n{}{end}", old.banner, old.text).as_bytes())
}

fn load_evidence(args: &InputArgs) -> Result<Vec<EvidenceItem>, Failure> {
    let Some(path) = &args.evidence else {
        return Ok(Vec::new());
    };
    let text = read_file(path)?;
    serde_json::from_str(&text).map_err(|e| {
        Failure::Message(format!(
            "{}: not a JSON array of evidence items: {e}",
            path.display()
        ))
    })
}

/// The config file as the binary reads it: the core keys and each host's table, all from
/// one reading of the file, and all checked whichever command runs.
pub(crate) struct Settings {
    pub(crate) config: Config,
    pub(crate) proxy: staleguard_proxy::ProxyConfig,
    pub(crate) mcp: staleguard_mcp::McpConfig,
}

pub(crate) fn load_config(path: Option<&Path>) -> Result<Settings, Failure> {
    let default = Path::new("staleguard.toml");
    let file = match path {
        Some(p) => Some((p, read_file(p)?)),
        None if default.is_file() => Some((default, read_file(default)?)),
        None => None,
    };
    let named = |e: ConfigError| match &file {
        Some((p, _)) => Failure::Message(format!("{}: {e}", p.display())),
        None => Failure::Message(e.to_string()),
    };
    let text = file.as_ref().map(|(_, text)| text.as_str());
    let env = |name: &str| std::env::var(name).ok();
    let config = Config::load(text, env).map_err(named)?;
    let proxy = text
        .map(staleguard_proxy::ProxyConfig::from_toml)
        .transpose()
        .map_err(named)?;
    let mcp = text
        .map(staleguard_mcp::McpConfig::from_toml)
        .transpose()
        .map_err(named)?;
    Ok(Settings {
        config,
        proxy: proxy.unwrap_or_default(),
        mcp: mcp.unwrap_or_default(),
    })
}

fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        // A closed pipe (`| head`) is the reader's choice, not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.map_err(|e| Failure::Message(format!("cannot write standard output: {e}"))),
    }
}

fn demo(format: &str) -> Result<(), Failure> {
    let (body, file) = match format {
        "openai" => (DEMO_OPENAI, "long_page.openai.json"),
        "anthropic" => (DEMO_ANTHROPIC, "long_page.anthropic.json"),
        other => {
            return Err(Failure::Message(format!(
                "demo has openai and anthropic sessions, not {other:?}"
            )))
        }
    };
    let config = Config {
        browser_history_compaction: true,
        ..Config::default()
    };
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    let projected = project(body, RequestFormat::Auto, &config, options)?;
    let report = inspect::Report::new(body, &projected);
    let mut text = format!(
        "staleguard demo: fixtures/demo/{file} (@playwright/mcp 0.0.41, Chromium)\n\n$ staleguard inspect {file}\n"
    );
    text.push_str(&report.to_table());
    text.push_str(&before_after(body, file, &projected));
    write_stdout(text.as_bytes())
}

/// The first collapsed observation, before and after.
fn before_after(body: &str, file: &str, projected: &Projection) -> String {
    let Some(first) = projected
        .report()
        .results
        .iter()
        .find(|r| r.status == staleguard::Status::Collapsed)
    else {
        return String::new();
    };
    let before = message_content(body, first.message);
    let after = message_content(&projected.body, first.message);
    let head: Vec<&str> = before.lines().take(14).collect();
    format!(
        "\n$ staleguard project {file}   # message {} ({}), before: {} bytes\n{}\n    ... {} more lines\n\nafter: {} bytes\n{}\n",
        first.message,
        first.tool,
        before.len(),
        head.join("\n"),
        before.lines().count().saturating_sub(head.len()),
        after.len(),
        after
    )
}

/// The text of a message's tool result: its content (OpenAI Chat) or its first
/// `tool_result` block's content (Anthropic).
fn message_content(body: &str, index: usize) -> String {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return String::new();
    };
    let content = &v["messages"][index]["content"];
    let content = match content.as_array() {
        Some(blocks) => blocks
            .iter()
            .find(|b| b["type"] == "tool_result")
            .map_or(content, |b| &b["content"]),
        None => content,
    };
    content.as_str().map(str::to_string).unwrap_or_default()
}
