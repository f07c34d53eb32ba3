//! `staleguard mcp`: flags and config into relay options; the exit code is the server's.

use std::ffi::OsString;

use staleguard_mcp::Options;

use crate::Failure;

/// Flags of `staleguard mcp`; each overrides the `[mcp]` table of the config.
#[derive(clap::Args)]
pub(crate) struct McpArgs {
    /// Pass calls and results through unchanged: no refusals, no ref namespacing, no
    /// guidance, no snapshots of our own.
    #[arg(long)]
    no_guard: bool,
    /// Do not add the read-only `browser_history` tool.
    #[arg(long)]
    no_history_tool: bool,
    /// Leave refs as the server writes them instead of scoping them to their document
    /// (`e7` on the third document becomes `d3e7`).
    #[arg(long)]
    no_namespace_refs: bool,
    /// Browser results without page change before the result carries guidance (default 3).
    #[arg(long, value_name = "N")]
    max_repeats: Option<u32>,
    /// Observations kept for the guard and the history tool (default 200); older ones are
    /// forgotten.
    #[arg(long, value_name = "N")]
    max_observations: Option<usize>,
    /// Seconds a call waits for the guard's own snapshot of a file-linked page before it is
    /// refused (default 30).
    #[arg(long, value_name = "SECS")]
    snapshot_timeout_secs: Option<u64>,
    /// Config file (default: ./staleguard.toml when it exists).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// The MCP server to start, after `--`: `staleguard mcp -- npx @playwright/mcp --headless`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<OsString>,
}

pub(crate) fn run(args: McpArgs) -> Result<(), Failure> {
    let crate::Settings {
        mut config, mcp, ..
    } = crate::load_config(args.config.as_deref())?;
    if let Some(n) = args.max_repeats {
        config.max_repeats = n;
    }
    let mut options = Options::new(config, &mcp);
    options.guard &= !args.no_guard;
    options.history_tool &= !args.no_history_tool;
    options.namespace_refs &= !args.no_namespace_refs;
    if let Some(secs) = args.snapshot_timeout_secs {
        options.snapshot_timeout = std::time::Duration::from_secs(secs);
    }
    if let Some(n) = args.max_observations {
        options.max_observations = n.max(1);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Message(format!("cannot start the runtime: {e}")))?;
    let code = runtime
        .block_on(staleguard_mcp::run(&args.command, options))
        .map_err(|e| Failure::Message(e.to_string()))?;
    // Standard input is read on a blocking thread that a runtime cannot cancel: leave now.
    std::process::exit(code);
}
