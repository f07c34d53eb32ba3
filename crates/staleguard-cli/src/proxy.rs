//! `staleguard proxy`: flags and config into proxy settings, logging, signals.

use std::time::Duration;

use staleguard_proxy::{Route, Routes, Settings};

use crate::Failure;

/// Flags of `staleguard proxy`; each overrides the `[proxy]` table of the config.
#[derive(clap::Args)]
pub(crate) struct ProxyArgs {
    /// Address to listen on (default 127.0.0.1:8787).
    #[arg(long)]
    listen: Option<String>,
    /// Send every request to this origin (http:// or https://).
    #[arg(long)]
    upstream: Option<String>,
    /// Send requests under PREFIX to URL, without the prefix: `/openai=https://api.openai.com`.
    #[arg(long = "route", value_name = "PREFIX=URL")]
    routes: Vec<String>,
    /// Answer 400 to a model request whose body cannot be read, instead of forwarding it.
    #[arg(long)]
    fail_closed: bool,
    /// Largest request body accepted (default 64 MiB); larger ones get 413.
    #[arg(long, value_name = "N")]
    max_body_bytes: Option<usize>,
    /// Seconds the upstream may take to start answering (default 600); then 504.
    #[arg(long, value_name = "SECS")]
    upstream_timeout_secs: Option<u64>,
    /// Bytes of derived data the proxy keeps across requests to skip re-reading results it
    /// has seen (default 256 MiB; 0 turns the memo off). Answers do not depend on it.
    #[arg(long, value_name = "N")]
    memo_bytes: Option<usize>,
    /// Path of GET requests the proxy answers with its metrics instead of forwarding them
    /// (default /metrics; an empty value forwards that path too).
    #[arg(long, value_name = "PATH")]
    metrics_path: Option<String>,
    /// After SIGTERM or Ctrl-C, seconds the requests in flight may take to finish before the
    /// proxy exits anyway (default 30).
    #[arg(long, value_name = "SECS")]
    shutdown_grace_secs: Option<u64>,
    /// Log one JSON object per line.
    #[arg(long)]
    log_json: bool,
    /// Config file (default: ./staleguard.toml when it exists).
    #[arg(long)]
    config: Option<std::path::PathBuf>,
}

const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

pub(crate) fn run(args: ProxyArgs) -> Result<(), Failure> {
    let crate::Settings {
        config,
        proxy: file,
        ..
    } = crate::load_config(args.config.as_deref())?;
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let settings = Settings {
        routes: routes(
            args.upstream.or(file.upstream),
            if args.routes.is_empty() {
                file.routes
            } else {
                args.routes
            },
        )?,
        fail_closed: args.fail_closed || file.fail_closed.unwrap_or(false),
        max_body_bytes: args
            .max_body_bytes
            .or(file.max_body_bytes)
            .unwrap_or(64 * 1024 * 1024),
        upstream_timeout: Duration::from_secs(
            args.upstream_timeout_secs
                .or(file.upstream_timeout_secs)
                .unwrap_or(600),
        ),
        memo_bytes: args
            .memo_bytes
            .or(file.memo_bytes)
            .unwrap_or(staleguard::Memo::DEFAULT_BYTES),
        metrics_path: metrics_path(args.metrics_path.or(file.metrics_path))?,
        shutdown_grace: args
            .shutdown_grace_secs
            .or(file.shutdown_grace_secs)
            .map_or(
                staleguard_proxy::DEFAULT_SHUTDOWN_GRACE,
                Duration::from_secs,
            ),
        staleguard: config,
    };
    init_logging(args.log_json || file.log_json.unwrap_or(false));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::Message(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&listen)
            .await
            .map_err(|e| Failure::Message(format!("cannot listen on {listen}: {e}")))?;
        let local = listener.local_addr().map(|a| a.to_string()).unwrap_or(listen);
        eprintln!("{}", startup_line(&local, &settings));
        if !settings.staleguard.browser_history_compaction {
            eprintln!("staleguard proxy: warning: browser history compaction is off (set BROWSER_HISTORY_COMPACTION=on or browser_history_compaction = true); requests pass through unchanged");
        }
        staleguard_proxy::serve(settings, listener, shutdown_signal())
            .await
            .map_err(|e| Failure::Message(format!("proxy stopped: {e}")))
    })
}

fn routes(upstream: Option<String>, routes: Vec<String>) -> Result<Routes, Failure> {
    let mut all = Vec::new();
    if let Some(u) = upstream {
        all.push(Route::everything(&u).map_err(Failure::Message)?);
    }
    for r in routes {
        all.push(Route::parse(&r).map_err(Failure::Message)?);
    }
    if all.is_empty() {
        return Err(Failure::Message("give --upstream URL or --route PREFIX=URL (or [proxy] upstream / routes in the config)".into()));
    }
    Ok(Routes(all))
}

/// The metrics path: `/metrics` unless given, none when given empty.
fn metrics_path(path: Option<String>) -> Result<Option<String>, Failure> {
    match path {
        None => Ok(Some(staleguard_proxy::DEFAULT_METRICS_PATH.to_string())),
        Some(p) if p.is_empty() => Ok(None),
        Some(p) if p.starts_with('/') => Ok(Some(p)),
        Some(p) => Err(Failure::Message(format!(
            "metrics path {p:?} must start with / (or be empty to turn it off)"
        ))),
    }
}

fn startup_line(listen: &str, s: &Settings) -> String {
    let on = |b: bool| if b { "on" } else { "off" };
    let c = &s.staleguard;
    let routes: Vec<String> = s
        .routes
        .0
        .iter()
        .map(|r| {
            format!(
                "{} -> {}",
                if r.prefix.is_empty() { "/" } else { &r.prefix },
                r.upstream
            )
        })
        .collect();
    // A catch-all route would have sent that path upstream: say that the proxy answers it.
    let metrics = match &s.metrics_path {
        Some(path) => format!("GET {path} answered by the proxy (metrics)"),
        None => "metrics off".to_string(),
    };
    format!(
        "staleguard proxy on http://{listen} [{}]; compaction {}, evidence {}, progress {}; {}; max body {} bytes; upstream timeout {} s; memo {} bytes; {metrics}",
        routes.join(", "),
        on(c.browser_history_compaction),
        on(c.evidence_enabled()),
        on(c.progress_enabled()),
        if s.fail_closed { "fail-closed" } else { "fail-open" },
        s.max_body_bytes,
        s.upstream_timeout.as_secs(),
        s.memo_bytes
    )
}

fn init_logging(json: bool) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false);
    // A subscriber set twice (tests) is not an error worth stopping for.
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Resolves on SIGTERM or Ctrl-C; the server then stops accepting and finishes the streams in
/// flight within the shutdown grace.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
