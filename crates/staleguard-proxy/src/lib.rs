//! `staleguard proxy`: a drop-in HTTP proxy for the OpenAI, Anthropic and Gemini APIs.
//!
//! Point an agent's base URL here. Model requests (`POST .../chat/completions`,
//! `.../responses`, `.../messages`, `.../messages/count_tokens`,
//! `.../models/{model}:generateContent` and `:streamGenerateContent`) are projected by the
//! staleguard core before they go upstream; every other request passes through byte for
//! byte, and every response, SSE included, streams back chunk by chunk. The proxy keeps no
//! state between requests that changes an answer, so any number of them can run behind a
//! load balancer. It reads what the provider billed from a copy of each answer as it passes
//! ([`usage`]), logs it when the answer ends, and serves running totals on `GET /metrics`.
//!
//! The proxy speaks HTTP only. A WebSocket handshake (`Upgrade: websocket`) on a model path is
//! answered `426 Upgrade Required` at once, logged as one request line with
//! `outcome=websocket_refused`. That is for Codex CLI's built-in `openai` provider, which opens
//! a WebSocket on `GET .../responses` when a session starts: Codex takes a 426 on the
//! handshake, and no other answer, as the server's word that it has no WebSockets, and sends
//! the session's requests as `POST .../responses` from then on, where they are projected; any
//! other failure it retries with backoff for about 6 s before it falls back. Relaying the
//! WebSocket instead would gain nothing: over it Codex sends each turn as only the items added
//! since its previous response (`previous_response_id`), so the older pages are never in a
//! message to collapse. A handshake on any other path goes upstream as other requests do,
//! without its hop-by-hop `Upgrade`.
//!
//! # Under stress
//!
//! - **Sockets**: `TCP_NODELAY` is set on every accepted connection and on every upstream
//!   connection, so an answer's head and its first bytes, written apart, never wait for the
//!   peer's delayed ACK (about 40 ms on Linux).
//! - **Redirects** are never followed: a 3xx from the upstream reaches the client as given,
//!   so a request body and its credentials are never replayed to another location.
//! - **The client goes away** mid-answer: the answer's body is dropped, which drops the
//!   upstream response and closes its connection, so the upstream sees the request cancelled.
//! - **The upstream stalls or breaks off**: `upstream_timeout` bounds the wait for the head
//!   and every silence after it; an answer cut short (a half-close, a reset, a silence)
//!   ends the client's answer with an error at that point (HTTP/1.1: the connection closes
//!   before the length or the last chunk), after every byte the upstream sent.
//! - **Bodies**: over `max_body_bytes` (by `Content-Length`, or as read when chunked) is
//!   413 with a JSON error naming the limit; a gzip or zstd body is decoded to at most that
//!   many bytes (a bomb is 413, never held in memory), and one that does not decode as its
//!   `Content-Encoding` says is passed through unchanged (400 with `fail_closed`).
//! - **Shutdown** ([`serve`]): the listener closes at once, `GET /readyz` answers 503
//!   ([`health`]), requests in flight finish within `shutdown_grace`, and whatever is still
//!   open then is cut.

mod config;
mod exchange;
mod frames;
pub mod health;
mod metrics;
mod outgoing;
mod route;
pub mod usage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use staleguard::{Config, Engine, Memo, Options, Projection, RequestFormat};

use exchange::{Exchange, Tallied};
use frames::Frames;
use outgoing::Outgoing;

pub use config::ProxyConfig;
pub use metrics::Metrics;
pub use route::{Route, Routes, GEMINI_UPSTREAM};

/// Everything the proxy needs to run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub routes: Routes,
    /// Answer 400 to a model request whose body cannot be read, instead of forwarding it.
    pub fail_closed: bool,
    pub max_body_bytes: usize,
    /// How long the upstream may take to start its response.
    pub upstream_timeout: Duration,
    /// Bound of the memo of result readings kept across requests, in bytes; 0 turns it off.
    /// The memo only saves work: answers are the same with it cold, warm or off.
    pub memo_bytes: usize,
    /// The path of `GET` requests the proxy answers with its metrics itself instead of
    /// forwarding them (`/metrics`); `None` forwards every path.
    pub metrics_path: Option<String>,
    /// After the shutdown signal, how long requests in flight may take to finish before
    /// [`serve`] returns and they are cut.
    pub shutdown_grace: Duration,
    pub staleguard: Config,
}

/// Where `GET` answers the metrics unless the settings move it.
pub const DEFAULT_METRICS_PATH: &str = "/metrics";

/// How long requests in flight may take to finish after the shutdown signal, unless the
/// settings say otherwise.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

struct Shared {
    settings: Settings,
    /// The core's config, compiled once for every request.
    engine: Arc<Engine>,
    client: reqwest::Client,
    memo: Option<Arc<Memo>>,
    metrics: Arc<Metrics>,
    health: Arc<health::Health>,
}

/// Serves on `listener` until `shutdown` resolves. Then the listener is closed (new
/// connections are refused), `GET /readyz` answers 503, and requests in flight, streams
/// included, may finish within the settings' `shutdown_grace`; what is still open then is
/// left to be cut, and this returns.
pub async fn serve(
    settings: Settings,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let client = client()?;
    let grace = settings.shutdown_grace;
    let health = Arc::new(health::Health::default());
    let app = app_with(settings, client, Arc::clone(&health));
    let listener = listener.tap_io(accepted);
    let (signalled, signal) = tokio::sync::oneshot::channel::<()>();
    let shutdown = async move {
        shutdown.await;
        health.drain();
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        let _ = signalled.send(());
    };
    let server = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown);
    let deadline = async move {
        match signal.await {
            Ok(()) => tokio::time::sleep(grace).await,
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        served = server => served,
        () = deadline => {
            tracing::warn!(
                grace_secs = grace.as_secs_f64(),
                "shutdown grace over: cutting the requests still in flight"
            );
            Ok(())
        }
    }
}

/// Tunes an accepted connection: `TCP_NODELAY`, so that an answer's head and its body, written
/// apart, go out at once instead of the body waiting for the client's delayed ACK.
fn accepted(tcp: &mut tokio::net::TcpStream) {
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::warn!("cannot set TCP_NODELAY on an accepted connection: {e}");
    }
}

/// The HTTP client the proxy sends upstream with: `TCP_NODELAY`, and redirects never
/// followed (a 3xx goes back to the client as the upstream gave it).
pub fn client() -> std::io::Result<reqwest::Client> {
    reqwest::Client::builder()
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| std::io::Error::other(format!("HTTP client: {e}")))
}

/// The proxy as a plain axum router: one handler for every path and method. Build `client`
/// with [`client`] unless there is a reason not to.
pub fn app(settings: Settings, client: reqwest::Client) -> Router {
    app_with(settings, client, Arc::default())
}

fn app_with(settings: Settings, client: reqwest::Client, health: Arc<health::Health>) -> Router {
    Router::new().fallback(handle).with_state(Arc::new(Shared {
        memo: (settings.memo_bytes > 0).then(|| Arc::new(Memo::new(settings.memo_bytes))),
        engine: Arc::new(Engine::new(settings.staleguard.clone())),
        settings,
        client,
        metrics: Arc::new(Metrics::new()),
        health,
    }))
}

/// What the proxy did with a request body, for the response header, the log and the metrics.
enum Outcome {
    Projection {
        collapsed: usize,
        /// Decoded bytes received.
        received: usize,
        saved: i64,
        format: RequestFormat,
        /// What became of the breakpoint of our own (Anthropic, SPEC 9).
        breakpoint: &'static str,
        /// Read from a checkpoint on: only what is new since the session's previous turn.
        resumed: bool,
        /// How the live page went: `lean` when one was sent lean, else `whole`.
        live_page: &'static str,
    },
    Passthrough(&'static str),
    Untouched,
}

impl Outcome {
    fn header(&self) -> Option<HeaderValue> {
        let text = match self {
            Outcome::Projection {
                collapsed,
                saved,
                live_page,
                ..
            } => {
                let lean = if *live_page == "lean" {
                    "; live_page=lean"
                } else {
                    ""
                };
                format!("projected; collapsed={collapsed}; saved_bytes={saved}{lean}")
            }
            Outcome::Passthrough(reason) => format!("passthrough; reason={reason}"),
            Outcome::Untouched => return None,
        };
        HeaderValue::from_str(&text).ok()
    }

    fn format(&self) -> &'static str {
        match self {
            Outcome::Projection { format, .. } => format.name(),
            _ => "-",
        }
    }

    /// The `outcome` label of the requests metric.
    fn label(&self) -> &'static str {
        match self {
            Outcome::Projection { .. } => "projected",
            Outcome::Passthrough(_) => "passthrough",
            Outcome::Untouched => "untouched",
        }
    }
}

/// An answer the proxy gives itself instead of forwarding, and its `outcome` label.
struct Refusal {
    outcome: &'static str,
    status: StatusCode,
    kind: &'static str,
    message: String,
}

fn refusal(
    outcome: &'static str,
    status: StatusCode,
    kind: &'static str,
    message: &str,
) -> Refusal {
    Refusal {
        outcome,
        status,
        kind,
        message: message.to_string(),
    }
}

/// A request ready to go upstream.
struct Ready {
    url: String,
    headers: HeaderMap,
    body: Outgoing,
    outcome: Outcome,
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    if parts.method == Method::GET
        && shared.settings.metrics_path.as_deref() == Some(parts.uri.path())
    {
        return shared.metrics.response();
    }
    let routes = shared.settings.routes.0.len();
    if let Some(answer) = shared
        .health
        .answer(&parts.method, parts.uri.path(), routes)
    {
        return answer;
    }
    let mut exchange = Exchange::new(Arc::clone(&shared.metrics), &parts, started);
    match prepare(&shared, &parts, body, &mut exchange).await {
        Ok(ready) => forward(&shared, parts.method, ready, exchange).await,
        Err(r) => exchange.refused(r.outcome, error(r.status, r.kind, &r.message)),
    }
}

/// Finds the route and reads and projects the body.
async fn prepare(
    shared: &Shared,
    parts: &axum::http::request::Parts,
    body: Body,
    exchange: &mut Exchange,
) -> Result<Ready, Refusal> {
    let target = shared.settings.routes.target(&parts.uri).ok_or_else(|| {
        let path = parts.uri.path();
        refusal(
            "no_route",
            StatusCode::NOT_FOUND,
            "no_route",
            &format!("no upstream route for {path}"),
        )
    })?;
    if is_websocket_upgrade(&parts.headers) && model_format(&Method::POST, target.path()).is_some()
    {
        let path = parts.uri.path();
        return Err(refusal(
            "websocket_refused",
            StatusCode::UPGRADE_REQUIRED,
            "websocket_not_supported",
            &format!(
                "staleguard proxy projects model requests over HTTP only: send POST {path} instead of opening a WebSocket"
            ),
        ));
    }
    let limit = shared.settings.max_body_bytes;
    let too_large = || {
        refusal(
            "too_large",
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            &format!("request body is over {limit} bytes"),
        )
    };
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let body = Frames::read(body, limit).await.ok_or_else(too_large)?;
    exchange.received(body.len());
    let mut headers = forwarded_headers(&parts.headers);
    let format = model_format(&parts.method, target.path());
    exchange.reads_usage = format.is_some() && bills_input(target.path());
    let (body, outcome) = match format {
        Some(format) => rewrite(shared, &mut headers, body, format).await?,
        None => (body.into(), Outcome::Untouched),
    };
    Ok(Ready {
        url: target.as_str().to_string(),
        headers,
        body,
        outcome,
    })
}

/// The request asks to open a WebSocket: `Upgrade` names `websocket`. `Connection: upgrade` is
/// not required, since a hop in front may have dropped it; without the proxy's answer the
/// request would go upstream as a plain `GET` (`Upgrade` is hop-by-hop) and fail there.
fn is_websocket_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|protocol| {
            let name = protocol.trim().split('/').next().unwrap_or_default();
            name.eq_ignore_ascii_case("websocket")
        })
}

/// Whether a model endpoint's answer carries billed usage: a token count is not billed.
fn bills_input(path: &str) -> bool {
    !path.trim_end_matches('/').ends_with("/count_tokens")
}

/// The request format a model endpoint takes, for a `POST` to one.
fn model_format(method: &Method, path: &str) -> Option<RequestFormat> {
    if method != Method::POST {
        return None;
    }
    let path = path.trim_end_matches('/');
    if path.ends_with("/chat/completions") {
        Some(RequestFormat::OpenAiChat)
    } else if path.ends_with("/responses") {
        Some(RequestFormat::Responses)
    } else if path.ends_with("/messages") || path.ends_with("/messages/count_tokens") {
        Some(RequestFormat::Anthropic)
    } else if is_gemini_generation(path) {
        Some(RequestFormat::Gemini)
    } else {
        None
    }
}

/// Gemini's `.../models/{model}:generateContent` and `:streamGenerateContent` (tuned
/// models and Vertex AI's `publishers/google/models/...` too). Both take the same request
/// body; how the answer streams (`?alt=sse` or a JSON array) is the answer's business.
/// Gemini Code Assist's `/v1internal:generateContent` and `:streamGenerateContent` (Gemini
/// CLI signed in with Google, its `CODE_ASSIST_ENDPOINT` at the proxy) wrap the same request
/// in `{"model", "project", "request"}`, which the core reads.
/// `:countTokens` is not projected: its body may wrap the request in
/// `generateContentRequest`, and a body the proxy cannot read must not be refused.
fn is_gemini_generation(path: &str) -> bool {
    let Some((resource, method)) = path.rsplit_once(':') else {
        return false;
    };
    let in_models = resource
        .rsplit_once('/')
        .is_some_and(|(parent, _)| parent.ends_with("/models") || parent.ends_with("/tunedModels"));
    let code_assist = resource.ends_with("/v1internal");
    (in_models || code_assist) && matches!(method, "generateContent" | "streamGenerateContent")
}

/// Decodes and projects a model request body. A body that cannot be read goes upstream
/// unchanged (fail-open), or is refused with 400 (fail-closed).
async fn rewrite(
    shared: &Shared,
    headers: &mut HeaderMap,
    frames: Frames,
    format: RequestFormat,
) -> Result<(Outgoing, Outcome), Refusal> {
    let settings = &shared.settings;
    if !settings.staleguard.browser_history_compaction {
        return Ok((frames.into(), Outcome::Untouched));
    }
    let engine = shared.engine.clone();
    let memo = shared.memo.clone();
    // The next turn of a session the memo holds is projected here, where its body arrived,
    // from its frames as they came: only the bytes after the checkpoint's resume point are
    // copied and read as text (about half a millisecond for a megabyte). A whole projection
    // gets a thread of its own.
    let encoded = encoding(headers) != "identity";
    if !encoded {
        match caught(|| Ok(resumed_from(&frames, format, &engine, memo.as_deref()))) {
            Ok(Some(done)) => return Ok(projected(headers, done)),
            Ok(None) => {}
            Err(failed) => {
                return failed_projection(&shared.metrics, settings.fail_closed, headers, failed)
                    .map(|o| (frames.into(), o))
            }
        }
    }
    let body = frames.join();
    let plain = match decode(headers, &body, settings.max_body_bytes) {
        Ok(plain) => plain,
        Err(Decode::TooLarge(limit)) => {
            let message = format!("decoded request body is over {limit} bytes");
            return Err(refusal(
                "too_large",
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                &message,
            ));
        }
        Err(Decode::Failed(message)) => {
            let failed = Failed::Unreadable("undecodable-body", message);
            return failed_projection(&shared.metrics, settings.fail_closed, headers, failed)
                .map(|o| (body.into(), o));
        }
    };
    // A decoded body may be the next turn too; an identity one was asked above.
    let inline = match encoded {
        true => caught(|| resumed(&plain, format, &engine, memo.as_deref())),
        false => Ok(None),
    };
    let done = match inline {
        Ok(Some(done)) => Ok(done),
        Ok(None) => {
            off_the_scheduler(move || whole(&plain, format, &engine, memo.as_deref())).await
        }
        Err(message) => Err(message),
    };
    match done {
        Ok(done) => Ok(projected(headers, done)),
        Err(failed) => failed_projection(&shared.metrics, settings.fail_closed, headers, failed)
            .map(|o| (body.into(), o)),
    }
}

/// Why a model request could not be projected.
enum Failed {
    /// The body cannot be read (`unreadable-body`, `undecodable-body`): the client's to fix.
    Unreadable(&'static str, String),
    /// staleguard panicked: a bug of ours, whatever the body.
    Internal,
}

impl Failed {
    /// The reason as the `x-staleguard` header, the log and the metric name it.
    fn reason(&self) -> &'static str {
        match self {
            Failed::Unreadable(reason, _) => reason,
            Failed::Internal => "internal-error",
        }
    }
}

/// A projection that failed: counted and logged (with the client's session, never the
/// body), then the body goes upstream as it came (fail-open) or is refused (fail-closed).
fn failed_projection(
    metrics: &Metrics,
    fail_closed: bool,
    headers: &HeaderMap,
    failed: Failed,
) -> Result<Outcome, Refusal> {
    let reason = failed.reason();
    metrics.projection_failed(reason);
    let session = session_of(headers);
    let forwarded = match fail_closed {
        true => "refused",
        false => "forwarded unprojected",
    };
    match &failed {
        Failed::Internal => tracing::warn!(
            session = %session,
            reason,
            "projection failed: an internal error of staleguard (a bug, please report it); the request is {forwarded}"
        ),
        Failed::Unreadable(..) => tracing::warn!(
            session = %session,
            reason,
            "projection failed: the body cannot be read; the request is {forwarded}"
        ),
    }
    match (failed, fail_closed) {
        (_, false) => Ok(Outcome::Passthrough(reason)),
        (Failed::Unreadable(_, message), true) => Err(refusal(
            "refused",
            StatusCode::BAD_REQUEST,
            if reason == "undecodable-body" { "undecodable_body" } else { "unreadable_body" },
            &message,
        )),
        (Failed::Internal, true) => Err(refusal(
            "refused",
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "staleguard could not project this request (an internal error, logged); it was not forwarded",
        )),
    }
}

/// The client's session, as agents name it in a header (Codex `session-id`, opencode
/// `x-session-id`, Claude Code `x-claude-code-session-id`), for the log: `-` without one.
/// Only an identifier's characters are kept, at most 64, so a header cannot forge a log line.
fn session_of(headers: &HeaderMap) -> String {
    const NAMES: [&str; 4] = [
        "session-id",
        "x-session-id",
        "x-claude-code-session-id",
        "thread-id",
    ];
    let value = NAMES
        .iter()
        .find_map(|name| headers.get(*name)?.to_str().ok())
        .unwrap_or("-");
    let kept: String = value
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        .take(64)
        .collect();
    match kept.is_empty() {
        true => "-".to_string(),
        false => kept,
    }
}

/// What goes upstream for a projection of a body of `len` bytes, and how it is logged.
fn projected(headers: &mut HeaderMap, (len, p): (usize, Projection)) -> (Outgoing, Outcome) {
    headers.remove(header::CONTENT_ENCODING);
    let saved = len as i64 - p.body.len() as i64;
    let outcome = Outcome::Projection {
        collapsed: p.collapsed(),
        received: len,
        saved,
        format: p.format,
        breakpoint: breakpoint_label(p.breakpoint),
        resumed: p.resumed,
        live_page: match p.report().results.iter().any(|r| r.folded.is_some()) {
            true => "lean",
            false => "whole",
        },
    };
    (p.body.into(), outcome)
}

/// The body's frames projected from a checkpoint `memo` keeps, with the body's length;
/// `None` when it is not the next turn of a session the memo has seen.
fn resumed_from(
    frames: &Frames,
    format: RequestFormat,
    engine: &Engine,
    memo: Option<&Memo>,
) -> Option<(usize, Projection)> {
    let options = Options {
        memo,
        ..Options::default()
    };
    let parts = frames.parts();
    let projected = engine.project_resumed_parts(&parts, format, &options)?;
    Some((frames.len(), projected))
}

/// `plain` projected from a checkpoint `memo` keeps, with its length; `None` when it is not
/// the next turn of a session the memo has seen.
fn resumed(
    plain: &Bytes,
    format: RequestFormat,
    engine: &Engine,
    memo: Option<&Memo>,
) -> Result<Option<(usize, Projection)>, String> {
    let text = text_of(plain)?;
    let options = Options {
        memo,
        ..Options::default()
    };
    let projected = engine.project_resumed_parts(&[text.as_bytes()], format, &options);
    Ok(projected.map(|p| (text.len(), p)))
}

/// `plain` projected, with its length.
fn whole(
    plain: &Bytes,
    format: RequestFormat,
    engine: &Engine,
    memo: Option<&Memo>,
) -> Result<(usize, Projection), String> {
    let text = text_of(plain)?;
    let options = Options {
        memo,
        ..Options::default()
    };
    let projected = engine
        .project(text, format, options)
        .map_err(|e| e.to_string())?;
    Ok((text.len(), projected))
}

fn text_of(plain: &Bytes) -> Result<&str, String> {
    std::str::from_utf8(plain).map_err(|e| format!("body is not UTF-8: {e}"))
}

/// Runs `work` here; a panic in it is an error (fail-open or 400), never a dropped
/// connection.
fn caught<T>(work: impl FnOnce() -> Result<T, String>) -> Result<T, Failed> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        Ok(done) => done.map_err(|message| Failed::Unreadable("unreadable-body", message)),
        Err(_) => Err(Failed::Internal),
    }
}

/// Runs `work`, a whole projection (tens of milliseconds for a megabyte), on tokio's
/// blocking pool, so that the runtime's workers go on serving other requests meanwhile; a
/// panic in it is an error. (`block_in_place`, used before for every projection, hands the
/// worker's other tasks to a new thread on each call: with the proxy on a core of its own,
/// one resumed turn in ten stalled 4 to 7 ms on that in the latency bench.)
async fn off_the_scheduler<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Failed> {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done.map_err(|message| Failed::Unreadable("unreadable-body", message)),
        // A panic (or a runtime shutting down under it) is ours, never the body's.
        Err(_) => Err(Failed::Internal),
    }
}

/// The breakpoint of our own as the log names it: `no_room` says the request already had
/// the 4 breakpoints a provider takes, so the next turn's collapse is read from the cache
/// only as far as the client's breakpoints reach.
fn breakpoint_label(breakpoint: Option<staleguard::Breakpoint>) -> &'static str {
    breakpoint.map_or("-", staleguard::Breakpoint::as_str)
}

/// Why a body could not be decoded.
enum Decode {
    /// It decodes to more than the limit: refused like a plain body over it.
    TooLarge(usize),
    Failed(String),
}

/// The request's `Content-Encoding`, trimmed and lower case; `identity` when it has none.
fn encoding(headers: &HeaderMap) -> String {
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("identity")
        .trim()
        .to_ascii_lowercase();
    match encoding.is_empty() {
        true => "identity".to_string(),
        false => encoding,
    }
}

/// The body without its `Content-Encoding` (gzip or zstd), at most `limit` bytes decoded.
fn decode(headers: &HeaderMap, body: &Bytes, limit: usize) -> Result<Bytes, Decode> {
    use std::io::Read;
    let encoding = encoding(headers);
    let mut out = Vec::new();
    let read = match encoding.as_str() {
        "identity" => return Ok(body.clone()),
        "gzip" | "x-gzip" => flate2::read::GzDecoder::new(&body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        "zstd" => zstd::stream::read::Decoder::new(&body[..])
            .and_then(|d| d.take(limit as u64 + 1).read_to_end(&mut out)),
        other => {
            return Err(Decode::Failed(format!(
                "unsupported Content-Encoding {other:?}"
            )))
        }
    };
    read.map_err(|e| Decode::Failed(format!("cannot decode the {encoding} body: {e}")))?;
    if out.len() > limit {
        return Err(Decode::TooLarge(limit));
    }
    Ok(Bytes::from(out))
}

/// Hop-by-hop headers and those the proxy sets itself.
const DROPPED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

fn forwarded_headers(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        if !DROPPED.contains(&name.as_str()) {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Sends the request upstream and streams its answer back; the exchange rides along with
/// the answer's body and is logged and counted when it ends.
async fn forward(
    shared: &Shared,
    method: Method,
    ready: Ready,
    mut exchange: Exchange,
) -> Response {
    let Ready {
        url,
        headers,
        body,
        outcome,
    } = ready;
    let marker = outcome.header();
    exchange.forwarding(&outcome, body.len());
    let request = shared
        .client
        .request(method, url)
        .headers(headers)
        .body(body.into_body());
    let sent = tokio::time::timeout(shared.settings.upstream_timeout, request.send()).await;
    let upstream = match sent {
        Err(_) => {
            let secs = shared.settings.upstream_timeout.as_secs_f64();
            let response = error(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                &format!("the upstream did not answer within {secs} s"),
            );
            return exchange.refused("upstream_timeout", response);
        }
        Ok(Err(e)) => {
            let response = error(
                StatusCode::BAD_GATEWAY,
                "upstream_unreachable",
                &describe(&e),
            );
            return exchange.refused("upstream_unreachable", response);
        }
        Ok(Ok(response)) => response,
    };
    let mut response = Response::builder().status(upstream.status());
    if let Some(headers) = response.headers_mut() {
        for (name, value) in upstream.headers() {
            if !DROPPED.contains(&name.as_str()) || name == header::CONTENT_LENGTH {
                headers.append(name.clone(), value.clone());
            }
        }
        if let Some(value) = marker {
            headers.insert(HeaderName::from_static("x-staleguard"), value);
        }
    }
    exchange.answered(upstream.status(), upstream.headers());
    let idle = shared.settings.upstream_timeout;
    let stream = Tallied::new(upstream.bytes_stream(), exchange, idle);
    response
        .body(Body::from_stream(stream))
        .unwrap_or_else(|e| {
            error(
                StatusCode::BAD_GATEWAY,
                "bad_upstream_response",
                &e.to_string(),
            )
        })
}

/// An upstream error without URLs' credentials or request details.
fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "cannot connect to the upstream"
    } else if e.is_timeout() {
        "the upstream timed out"
    } else {
        "the upstream request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut cause = String::new();
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {cause}")
    }
}

/// A JSON error answer in the shape both providers use.
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"error": {"type": kind, "message": message, "source": "staleguard-proxy"}});
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_endpoints_and_their_formats() {
        let post = |path: &str| model_format(&Method::POST, path);
        for path in [
            "/v1beta/models/gemini-2.5-flash:generateContent",
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
            "/v1/models/gemini-2.5-pro:generateContent",
            "/v1beta/tunedModels/mine-01:generateContent",
            "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent",
            "/v1internal:generateContent",
            "/v1internal:streamGenerateContent",
        ] {
            assert_eq!(post(path), Some(RequestFormat::Gemini), "{path}");
            assert!(bills_input(path), "{path}");
        }
        for path in [
            "/v1beta/models/gemini-2.5-flash:countTokens",
            "/v1beta/models/gemini-2.5-flash:embedContent",
            "/v1beta/models/gemini-2.5-flash",
            "/v1beta/cachedContents",
            "/v1beta/files:generateContent",
            "/upload/v1beta/files",
            "/v1internal:countTokens",
            "/v1internal:loadCodeAssist",
        ] {
            assert_eq!(post(path), None, "{path}");
        }
        assert_eq!(
            model_format(&Method::GET, "/v1beta/models/g:generateContent"),
            None
        );
        assert_eq!(
            post("/v1/chat/completions"),
            Some(RequestFormat::OpenAiChat)
        );
        assert_eq!(post("/v1/messages"), Some(RequestFormat::Anthropic));
        assert_eq!(post("/v1/responses"), Some(RequestFormat::Responses));
    }

    /// The listener `serve` accepts from sets `TCP_NODELAY` on every connection.
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        use axum::serve::{Listener, ListenerExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = listener.tap_io(accepted);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (io, _) = listener.accept().await;
        assert!(
            io.nodelay().unwrap(),
            "TCP_NODELAY on an accepted connection"
        );
    }

    #[test]
    fn websocket_handshakes_are_told_by_their_upgrade_header() {
        let asks = |values: &[&str]| {
            let mut headers = HeaderMap::new();
            for v in values {
                headers.append(header::UPGRADE, HeaderValue::from_str(v).unwrap());
            }
            is_websocket_upgrade(&headers)
        };
        assert!(asks(&["websocket"]));
        assert!(asks(&["WebSocket"]));
        assert!(asks(&["h2c, websocket"]));
        assert!(asks(&["h2c", "websocket/13"]));
        assert!(!asks(&[]));
        assert!(!asks(&["h2c"]));
        assert!(!asks(&["websockets"]));
        assert!(!asks(&["HTTP/2.0"]));
    }

    /// A writer into a shared buffer, for the log of one test (`with_default`).
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Work that panics the way issue 41's projection did, on the body's own text.
    fn panicking_projection() -> Result<usize, String> {
        let body = std::hint::black_box("打开https://shop.example.com secret-body-text");
        Ok(body[..1].len())
    }

    #[test]
    fn a_panic_in_a_projection_is_counted_logged_and_passed_through() {
        let log = Captured::default();
        let writer = log.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let metrics = Metrics::new();
        let mut headers = HeaderMap::new();
        headers.insert(
            "x-session-id",
            HeaderValue::from_static("ses_42 \"forged=1\""),
        );
        let outcome = tracing::subscriber::with_default(subscriber, || {
            let failed = caught(panicking_projection).expect_err("the panic is caught");
            failed_projection(&metrics, false, &headers, failed)
        });
        let outcome = outcome.ok().expect("fail-open forwards the body");
        assert_eq!(
            outcome.header().unwrap(),
            "passthrough; reason=internal-error"
        );
        assert_eq!(outcome.label(), "passthrough");
        let text = metrics.text();
        let line = "staleguard_proxy_projection_failures_total{reason=\"internal-error\"} 1";
        assert!(text.contains(line), "{text}");
        let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        assert!(log.contains("WARN"), "{log}");
        assert!(log.contains("internal error"), "{log}");
        assert!(log.contains("session=ses_42forged1"), "{log}");
        assert!(
            !log.contains("secret-body-text") && !log.contains("打开"),
            "{log}"
        );
    }

    #[test]
    fn failing_closed_answers_500_for_our_bug_and_400_for_a_bad_body() {
        let metrics = Metrics::new();
        let headers = HeaderMap::new();
        let internal = caught(panicking_projection).err().unwrap();
        let refused = failed_projection(&metrics, true, &headers, internal)
            .err()
            .unwrap();
        assert_eq!(refused.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(refused.kind, "internal_error");
        let unreadable = caught(|| Err::<(), _>("not JSON".to_string()))
            .err()
            .unwrap();
        let refused = failed_projection(&metrics, true, &headers, unreadable)
            .err()
            .unwrap();
        assert_eq!(refused.status, StatusCode::BAD_REQUEST);
        assert_eq!(refused.kind, "unreadable_body");
        let text = metrics.text();
        assert!(text.contains("projection_failures_total{reason=\"unreadable-body\"} 1"));
    }

    #[tokio::test]
    async fn a_panic_on_the_blocking_pool_is_an_internal_error() {
        let failed = off_the_scheduler(panicking_projection).await.err();
        assert_eq!(failed.map(|f| f.reason()), Some("internal-error"));
        let done = off_the_scheduler(|| Ok::<_, String>(3)).await.ok();
        assert_eq!(done, Some(3));
    }
}
