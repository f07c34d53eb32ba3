//! Running totals of the proxy, served on `GET /metrics` in the Prometheus text format, so
//! a user sees on their own traffic what projection saves and whether the provider's prompt
//! cache holds.

use std::time::Duration;

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::usage::{Usage, UsageRead};

/// One label and its value: every family here has a single label of a few fixed values.
type Label = [(&'static str, &'static str); 1];

/// What the proxy did with a request: the `outcome` label of `requests_total`.
pub(crate) const OUTCOMES: &[&str] = &[
    "projected",
    "passthrough",
    "untouched",
    "refused",
    "too_large",
    "no_route",
    "upstream_unreachable",
    "upstream_timeout",
    "websocket_refused",
];

/// Why a model request could not be projected: the `reason` label of `projection_failures_total`.
pub(crate) const FAILURE_REASONS: &[&str] =
    &["internal-error", "unreadable-body", "undecodable-body"];

/// Upper bounds of the added-latency buckets, in seconds: the proxy adds milliseconds on
/// most requests and up to a second on bodies of many megabytes.
const LATENCY_BUCKETS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// The proxy's metrics; shared by every request, updated once a request has ended.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<Label, Counter>,
    projected_bytes: Family<Label, Counter>,
    saved_bytes: Gauge,
    input_tokens: Family<Label, Counter>,
    answers: Family<Label, Counter>,
    projection_failures: Family<Label, Counter>,
    added_latency: Histogram,
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let metrics = Metrics {
            registry: Registry::with_prefix("staleguard_proxy"),
            requests: Family::default(),
            projected_bytes: Family::default(),
            saved_bytes: Gauge::default(),
            input_tokens: Family::default(),
            answers: Family::default(),
            projection_failures: Family::default(),
            added_latency: Histogram::new(LATENCY_BUCKETS),
        };
        metrics.register()
    }

    fn register(mut self) -> Metrics {
        // Every label value is there from the start, at 0, so a query never finds a gap.
        let zero = |family: &Family<Label, Counter>, key, values: &[&'static str]| {
            for value in values {
                drop(family.get_or_create(&[(key, *value)]));
            }
        };
        zero(&self.requests, "outcome", OUTCOMES);
        zero(&self.projected_bytes, "stage", &["received", "forwarded"]);
        zero(
            &self.input_tokens,
            "kind",
            &["cache_read", "cache_write", "uncached"],
        );
        zero(&self.answers, "usage", &["read", "missing", "skipped"]);
        zero(&self.projection_failures, "reason", FAILURE_REASONS);
        let r = &mut self.registry;
        r.register(
            "requests",
            "Requests by what the proxy did with them",
            self.requests.clone(),
        );
        r.register(
            "projected_body_bytes",
            "Bytes of the request bodies the proxy projected, as received (decoded) and as forwarded",
            self.projected_bytes.clone(),
        );
        r.register(
            "saved_bytes",
            "Bytes projection removed from request bodies in all (received minus forwarded; negative when guidance and evidence added more)",
            self.saved_bytes.clone(),
        );
        r.register(
            "input_tokens",
            "Input tokens the provider billed on model answers, by cache_read, cache_write and uncached",
            self.input_tokens.clone(),
        );
        r.register(
            "answers",
            "Successful model answers by whether their usage was read (skipped: it could not be, see the log)",
            self.answers.clone(),
        );
        r.register(
            "projection_failures",
            "Model requests that could not be projected, by reason (internal-error: a bug of staleguard's; the others: a body that cannot be read); each went upstream unprojected, or was refused when failing closed",
            self.projection_failures.clone(),
        );
        r.register(
            "added_latency_seconds",
            "Time from a request's arrival until the proxy forwarded it (body read and projection)",
            self.added_latency.clone(),
        );
        self
    }

    pub fn request(&self, outcome: &'static str) {
        self.requests.get_or_create(&[("outcome", outcome)]).inc();
    }

    /// A projected body of `received` decoded bytes went upstream as `forwarded` bytes.
    pub fn projected(&self, received: usize, forwarded: usize) {
        let count = |stage, n: usize| {
            self.projected_bytes
                .get_or_create(&[("stage", stage)])
                .inc_by(n as u64);
        };
        count("received", received);
        count("forwarded", forwarded);
        let saved = received as i64 - forwarded as i64;
        self.saved_bytes.inc_by(saved);
    }

    /// A model request could not be projected, for `reason` (`internal-error`,
    /// `unreadable-body` or `undecodable-body`).
    pub fn projection_failed(&self, reason: &'static str) {
        self.projection_failures
            .get_or_create(&[("reason", reason)])
            .inc();
    }

    pub fn forwarded_after(&self, added: Duration) {
        self.added_latency.observe(added.as_secs_f64());
    }

    pub fn answer(&self, read: &UsageRead) {
        let label = match read {
            UsageRead::Read(usage) => {
                self.tokens(usage);
                "read"
            }
            UsageRead::Missing => "missing",
            UsageRead::Skipped(_) => "skipped",
        };
        self.answers.get_or_create(&[("usage", label)]).inc();
    }

    fn tokens(&self, usage: &Usage) {
        for (kind, n) in [
            ("cache_read", usage.cache_read),
            ("cache_write", usage.cache_write),
            ("uncached", usage.uncached),
        ] {
            self.input_tokens.get_or_create(&[("kind", kind)]).inc_by(n);
        }
    }

    /// The totals in the Prometheus text format (version 0.0.4).
    pub fn text(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// The `GET /metrics` answer.
    pub fn response(&self) -> Response {
        (
            StatusCode::OK,
            [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
            self.text(),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(text: &str, name_and_labels: &str) -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no sample {name_and_labels} in\n{text}"))
            .parse()
            .unwrap()
    }

    #[test]
    fn totals_in_text_format() {
        let m = Metrics::new();
        let text = m.text();
        for outcome in OUTCOMES {
            let line = format!("staleguard_proxy_requests_total{{outcome=\"{outcome}\"}}");
            assert_eq!(sample(&text, &line), 0.0);
        }
        m.request("projected");
        m.request("projected");
        m.projected(1000, 400);
        m.projected(100, 150);
        m.forwarded_after(Duration::from_millis(3));
        m.answer(&UsageRead::Read(Usage {
            cache_read: 900,
            cache_write: 100,
            uncached: 7,
        }));
        m.answer(&UsageRead::Skipped("br".into()));
        m.projection_failed("internal-error");
        let text = m.text();
        let got = |s: &str| sample(&text, s);
        assert_eq!(
            got("staleguard_proxy_requests_total{outcome=\"projected\"}"),
            2.0
        );
        assert_eq!(got("staleguard_proxy_saved_bytes"), 550.0);
        assert_eq!(
            got("staleguard_proxy_projected_body_bytes_total{stage=\"received\"}"),
            1100.0
        );
        assert_eq!(
            got("staleguard_proxy_input_tokens_total{kind=\"cache_read\"}"),
            900.0
        );
        assert_eq!(
            got("staleguard_proxy_input_tokens_total{kind=\"cache_write\"}"),
            100.0
        );
        assert_eq!(
            got("staleguard_proxy_answers_total{usage=\"skipped\"}"),
            1.0
        );
        assert_eq!(
            got("staleguard_proxy_projection_failures_total{reason=\"internal-error\"}"),
            1.0
        );
        assert_eq!(
            got("staleguard_proxy_projection_failures_total{reason=\"unreadable-body\"}"),
            0.0
        );
        assert_eq!(got("staleguard_proxy_added_latency_seconds_count"), 1.0);
        assert_eq!(
            got("staleguard_proxy_added_latency_seconds_bucket{le=\"0.0025\"}"),
            0.0
        );
        assert_eq!(
            got("staleguard_proxy_added_latency_seconds_bucket{le=\"0.005\"}"),
            1.0
        );
        assert!(text.contains("# TYPE staleguard_proxy_added_latency_seconds histogram"));
    }
}
