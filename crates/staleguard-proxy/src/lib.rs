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
mod projecting;
mod route;
mod upstream;
pub mod usage;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use staleguard::{Config, Engine, Memo, RequestFormat};

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
    upstream: upstream::Upstream,
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
        upstream: upstream::Upstream::new(client),
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
        Some(format) => projecting::rewrite(shared, &mut headers, body, format).await?,
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
    let request = shared.upstream.send(method, url, headers, body.into_body());
    let sent = tokio::time::timeout(shared.settings.upstream_timeout, request).await;
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
fn describe(e: &upstream::SendError) -> String {
    let kind = if e.is_connect() {
        "cannot connect to the upstream"
    } else if e.is_timeout() {
        "the upstream timed out"
    } else {
        "the upstream request failed"
    };
    match e.root_cause() {
        Some(cause) => format!("{kind}: {cause}"),
        None => kind.to_string(),
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
}
