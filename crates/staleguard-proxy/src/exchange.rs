//! One request from arrival to the end of its answer: what the log line and the metrics say
//! about it.
//!
//! An answer can end in three ways: the upstream finishes it, the upstream breaks it off, or
//! the client goes away. The exchange rides inside the answer's body stream and is logged and
//! counted when that stream is dropped, which happens in all three.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::Response;
use futures_util::Stream;
use std::future::Future;

use crate::metrics::Metrics;
use crate::usage::{UsageRead, UsageReader};
use crate::Outcome;

pub(crate) struct Exchange {
    metrics: Arc<Metrics>,
    method: Method,
    path: String,
    started: Instant,
    /// The `outcome` label; "untouched" until the request is prepared.
    outcome: &'static str,
    format: &'static str,
    collapsed: usize,
    live_page: &'static str,
    breakpoint: &'static str,
    /// The projection resumed from a checkpoint of the session's previous turn.
    resumed: bool,
    /// Decoded bytes received and bytes forwarded of a projected body.
    projected: Option<(usize, usize)>,
    bytes_in: usize,
    bytes_out: usize,
    /// The request goes to a model endpoint whose answer carries billed usage.
    pub(crate) reads_usage: bool,
    forwarded_after: Option<Duration>,
    status: u16,
    headers_after: Duration,
    usage: Option<UsageReader>,
    response_bytes: u64,
    /// The answer's `Content-Length`: once that much has passed, the answer is complete
    /// (the server stops reading the body there, so its end is never seen).
    expected_bytes: Option<u64>,
    ended: &'static str,
}

impl Exchange {
    pub(crate) fn new(metrics: Arc<Metrics>, parts: &Parts, started: Instant) -> Exchange {
        Exchange {
            metrics,
            method: parts.method.clone(),
            path: parts.uri.path().to_string(),
            started,
            outcome: "untouched",
            format: "-",
            collapsed: 0,
            live_page: "-",
            breakpoint: "-",
            resumed: false,
            projected: None,
            bytes_in: 0,
            bytes_out: 0,
            reads_usage: false,
            forwarded_after: None,
            status: 0,
            headers_after: Duration::ZERO,
            usage: None,
            response_bytes: 0,
            expected_bytes: None,
            ended: "proxy_answer",
        }
    }

    pub(crate) fn received(&mut self, bytes: usize) {
        self.bytes_in = bytes;
    }

    /// The request is about to go upstream: the time spent so far is what the proxy added.
    pub(crate) fn forwarding(&mut self, outcome: &Outcome, bytes_out: usize) {
        self.outcome = outcome.label();
        self.format = outcome.format();
        self.bytes_out = bytes_out;
        if let Outcome::Projection {
            collapsed,
            received,
            breakpoint,
            resumed,
            live_page,
            ..
        } = outcome
        {
            self.collapsed = *collapsed;
            self.live_page = live_page;
            self.breakpoint = breakpoint;
            self.resumed = *resumed;
            self.projected = Some((*received, bytes_out));
        }
        self.forwarded_after = Some(self.started.elapsed());
    }

    /// The proxy answers itself; the exchange ends here.
    pub(crate) fn refused(mut self, outcome: &'static str, response: Response) -> Response {
        self.outcome = outcome;
        self.status = response.status().as_u16();
        self.headers_after = self.started.elapsed();
        response
    }

    /// The upstream's answer has its head; its usage is read from the body as it passes.
    pub(crate) fn answered(&mut self, status: StatusCode, headers: &HeaderMap) {
        self.status = status.as_u16();
        self.headers_after = self.started.elapsed();
        self.ended = "client_closed";
        let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
        self.expected_bytes = text(header::CONTENT_LENGTH).and_then(|v| v.trim().parse().ok());
        if self.reads_usage && status.is_success() {
            self.usage = Some(UsageReader::new(
                text(header::CONTENT_TYPE),
                text(header::CONTENT_ENCODING),
            ));
        }
    }

    fn passed(&mut self, chunk: &[u8]) {
        self.response_bytes += chunk.len() as u64;
        if self.ended == "client_closed"
            && self
                .expected_bytes
                .is_some_and(|n| self.response_bytes >= n)
        {
            self.ended = "complete";
        }
        if let Some(reader) = &mut self.usage {
            reader.feed(chunk);
        }
    }

    fn count(&self, read: Option<&UsageRead>) {
        let m = &self.metrics;
        m.request(self.outcome);
        if let (Some((received, forwarded)), "projected") = (self.projected, self.outcome) {
            m.projected(received, forwarded);
        }
        if let Some(added) = self.forwarded_after {
            m.forwarded_after(added);
        }
        if let Some(read) = read {
            m.answer(read);
        }
    }

    fn log(&self, read: Option<&UsageRead>) {
        let (cache_read, cache_write, uncached, usage) = match read {
            Some(UsageRead::Read(u)) => (
                Some(u.cache_read),
                Some(u.cache_write),
                Some(u.uncached),
                "read".to_string(),
            ),
            Some(UsageRead::Missing) => (None, None, None, "missing".to_string()),
            Some(UsageRead::Skipped(why)) => (None, None, None, format!("skipped: {why}")),
            None => (None, None, None, "-".to_string()),
        };
        let ms = |d: Duration| (d.as_secs_f64() * 100_000.0).round() / 100.0;
        tracing::info!(
            method = %self.method,
            path = %self.path,
            format = %self.format,
            outcome = %self.outcome,
            bytes_in = self.bytes_in,
            bytes_out = self.bytes_out,
            collapsed = self.collapsed,
            live_page = %self.live_page,
            breakpoint = self.breakpoint,
            resumed = self.resumed,
            status = self.status,
            added_ms = self.forwarded_after.map(ms),
            latency_ms = self.headers_after.as_millis() as u64,
            total_ms = self.started.elapsed().as_millis() as u64,
            response_bytes = self.response_bytes,
            ended = %self.ended,
            cache_read_tokens = cache_read,
            cache_write_tokens = cache_write,
            uncached_input_tokens = uncached,
            usage = %usage,
            "request"
        );
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let read = self.usage.take().map(UsageReader::finish);
        self.count(read.as_ref());
        self.log(read.as_ref());
    }
}

type UpstreamBody = Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>;

/// The upstream's answer body on its way to the client, each chunk passed on as it comes and
/// read on the side. A silence longer than `idle` ends it with an error (`upstream_timeout`),
/// so an upstream that stops sending without closing cannot hold the client forever.
pub(crate) struct Tallied {
    inner: UpstreamBody,
    exchange: Exchange,
    idle: Duration,
    silence: Pin<Box<tokio::time::Sleep>>,
    done: bool,
    /// An upstream error held back one poll: see `poll_next`.
    failed: Option<std::io::Error>,
}

impl Tallied {
    pub(crate) fn new(
        body: impl Stream<Item = reqwest::Result<Bytes>> + Send + 'static,
        exchange: Exchange,
        idle: Duration,
    ) -> Tallied {
        Tallied {
            inner: Box::pin(body),
            exchange,
            idle,
            silence: Box::pin(tokio::time::sleep(idle)),
            done: false,
            failed: None,
        }
    }
}

impl Stream for Tallied {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(e) = this.failed.take() {
            return Poll::Ready(Some(Err(e)));
        }
        if this.done {
            return Poll::Ready(None);
        }
        match this.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                this.exchange.passed(&chunk);
                let next = tokio::time::Instant::now() + this.idle;
                this.silence.as_mut().reset(next);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                // hyper aborts the client connection on a body error without flushing what
                // it holds: an upstream that sends its last bytes and breaks off at once
                // would lose them. One Pending first lets it flush them.
                this.exchange.ended = "upstream_error";
                this.done = true;
                this.failed = Some(std::io::Error::other(e));
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            Poll::Ready(None) => {
                if this.exchange.ended == "client_closed" {
                    this.exchange.ended = "complete";
                }
                this.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match this.silence.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.exchange.ended = "upstream_timeout";
                    this.done = true;
                    let secs = this.idle.as_secs_f64();
                    let message = format!("the upstream sent nothing for {secs} s");
                    Poll::Ready(Some(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        message,
                    ))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}
