//! A model request's body read, decoded and projected: from the checkpoint of its session's
//! previous turn where the memo holds one, else whole on the blocking pool; and what the
//! proxy does when it cannot project one (fail-open or fail-closed, counted and logged).

use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use staleguard::{Engine, Memo, Options, Projection, RequestFormat};

use crate::frames::Frames;
use crate::metrics::Metrics;
use crate::outgoing::Outgoing;
use crate::{refusal, Outcome, Refusal, Shared};

/// Decodes and projects a model request body. A body that cannot be read goes upstream
/// unchanged (fail-open), or is refused with 400 (fail-closed).
pub(crate) async fn rewrite(
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
            let failed = Failed::Undecodable(message);
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
    /// The body cannot be read as a request: the client's to fix.
    Unreadable(String),
    /// Its `Content-Encoding` cannot be decoded: the client's to fix.
    Undecodable(String),
    /// staleguard panicked: a bug of ours, whatever the body.
    Internal,
}

impl Failed {
    /// A body read to an error message is unreadable.
    fn unreadable<T>(read: Result<T, String>) -> Result<T, Failed> {
        read.map_err(Failed::Unreadable)
    }

    /// The reason as the `x-staleguard` header, the log and the metric name it.
    fn reason(&self) -> &'static str {
        match self {
            Failed::Unreadable(_) => "unreadable-body",
            Failed::Undecodable(_) => "undecodable-body",
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
    let why = match failed {
        Failed::Internal => "an internal error of staleguard (a bug, please report it)",
        Failed::Unreadable(_) | Failed::Undecodable(_) => "the body cannot be read",
    };
    tracing::warn!(session = %session, reason, "projection failed: {why}; the request is {forwarded}");
    match (failed, fail_closed) {
        (_, false) => Ok(Outcome::Passthrough(reason)),
        (Failed::Unreadable(message), true) => Err(refusal(
            "refused",
            StatusCode::BAD_REQUEST,
            "unreadable_body",
            &message,
        )),
        (Failed::Undecodable(message), true) => Err(refusal(
            "refused",
            StatusCode::BAD_REQUEST,
            "undecodable_body",
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
        Ok(done) => Failed::unreadable(done),
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
        Ok(done) => Failed::unreadable(done),
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

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
