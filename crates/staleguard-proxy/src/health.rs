//! `GET /healthz` and `GET /readyz`, answered by the proxy itself and never forwarded.
//!
//! - `/healthz`: `200 {"status":"ok"}` as long as the process serves requests.
//! - `/readyz`: `200 {"status":"ready"}` while the proxy accepts connections and has at least
//!   one upstream route; `503 {"status":"draining"}` from the shutdown signal (SIGTERM) on,
//!   while the streams in flight finish, so a load balancer that still holds a connection
//!   takes this proxy out of rotation.

use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};

/// The path answered with the liveness check.
pub const HEALTH_PATH: &str = "/healthz";
/// The path answered with the readiness check.
pub const READY_PATH: &str = "/readyz";

/// Whether the proxy is draining: set once, when the shutdown signal comes.
#[derive(Debug, Default)]
pub(crate) struct Health {
    draining: AtomicBool,
}

impl Health {
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// The answer to a health check, or `None` when the request is not one.
    pub(crate) fn answer(&self, method: &Method, path: &str, routes: usize) -> Option<Response> {
        if method != Method::GET {
            return None;
        }
        let (status, text) = match path {
            HEALTH_PATH => (StatusCode::OK, "ok"),
            READY_PATH if self.draining.load(Ordering::SeqCst) => {
                (StatusCode::SERVICE_UNAVAILABLE, "draining")
            }
            READY_PATH if routes == 0 => (StatusCode::SERVICE_UNAVAILABLE, "no_upstream"),
            READY_PATH => (StatusCode::OK, "ready"),
            _ => return None,
        };
        let body = format!(r#"{{"status":"{text}"}}"#);
        let headers = [
            (header::CONTENT_TYPE, "application/json"),
            (header::CACHE_CONTROL, "no-store"),
        ];
        Some((status, headers, body).into_response())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(health: &Health, method: Method, path: &str, routes: usize) -> Option<u16> {
        health
            .answer(&method, path, routes)
            .map(|r| r.status().as_u16())
    }

    #[test]
    fn health_and_readiness() {
        let health = Health::default();
        assert_eq!(status(&health, Method::GET, "/healthz", 1), Some(200));
        assert_eq!(status(&health, Method::GET, "/readyz", 1), Some(200));
        assert_eq!(status(&health, Method::GET, "/readyz", 0), Some(503));
        assert_eq!(status(&health, Method::POST, "/readyz", 1), None);
        assert_eq!(status(&health, Method::GET, "/readyz/", 1), None);
        assert_eq!(status(&health, Method::GET, "/v1/models", 1), None);
        health.drain();
        assert_eq!(status(&health, Method::GET, "/readyz", 1), Some(503));
        assert_eq!(status(&health, Method::GET, "/healthz", 1), Some(200));
    }
}
