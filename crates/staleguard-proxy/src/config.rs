//! The `[proxy]` table of `staleguard.toml`: the proxy's own settings, next to the core
//! keys that [`staleguard::Config`] reads from the same file text.

use serde::Deserialize;
use staleguard::ConfigError;

/// Settings of the HTTP proxy from the `[proxy]` table. Unset keys take the proxy's
/// defaults; `staleguard proxy` flags win over them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    pub listen: Option<String>,
    pub upstream: Option<String>,
    /// `/prefix=URL` routes.
    #[serde(default)]
    pub routes: Vec<String>,
    pub fail_closed: Option<bool>,
    pub max_body_bytes: Option<usize>,
    pub upstream_timeout_secs: Option<u64>,
    pub log_json: Option<bool>,
    /// Bound of the memo of result readings across requests, in bytes (default 256 MiB).
    pub memo_bytes: Option<usize>,
    /// Path of `GET` requests answered with the proxy's metrics (default `/metrics`); an
    /// empty string forwards that path like any other.
    pub metrics_path: Option<String>,
    /// Seconds requests in flight may take to finish after SIGTERM (default 30).
    pub shutdown_grace_secs: Option<u64>,
}

/// The file as the proxy sees it: its table, every other key left to the core.
#[derive(Deserialize)]
struct File {
    proxy: Option<ProxyConfig>,
}

impl ProxyConfig {
    /// Reads the `[proxy]` table from the text of a `staleguard.toml`; no table gives the
    /// defaults. Unknown keys inside the table are refused, keys outside it are not looked
    /// at (they are [`staleguard::Config::load`]'s to check).
    pub fn from_toml(text: &str) -> Result<ProxyConfig, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|span| span.start);
            ConfigError::in_table(text, "proxy", e.message(), at)
        })?;
        Ok(file.proxy.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_table() {
        let file = "max_repeats = 5\n[proxy]\nlisten = \"127.0.0.1:9000\"\nroutes = [\"/openai=https://api.openai.com\"]\nfail_closed = true\nmemo_bytes = 1024\nmetrics_path = \"/_staleguard/metrics\"\n[mcp]\nguard = false";
        let c = ProxyConfig::from_toml(file).unwrap();
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:9000"));
        assert_eq!(c.routes, ["/openai=https://api.openai.com"]);
        assert_eq!(c.fail_closed, Some(true));
        assert_eq!(c.memo_bytes, Some(1024));
        assert_eq!(c.metrics_path.as_deref(), Some("/_staleguard/metrics"));
        assert_eq!(c.upstream, None);
        assert_eq!(ProxyConfig::from_toml("").unwrap(), ProxyConfig::default());
        assert_eq!(
            ProxyConfig::from_toml("max_repeats = 3").unwrap(),
            ProxyConfig::default()
        );
    }

    #[test]
    fn proxy_table_errors() {
        let err = ProxyConfig::from_toml("[proxy]\nlisen = \"x\"").unwrap_err();
        assert!(err.to_string().contains("lisen"), "{err}");
        assert!(err.to_string().starts_with("[proxy] lisen"), "{err}");
        let err = ProxyConfig::from_toml("[proxy]\nfail_closed = \"sometimes\"").unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
        let err = ProxyConfig::from_toml("proxy = 3").unwrap_err();
        assert!(err.to_string().contains("ProxyConfig"), "{err}");
        assert!(ProxyConfig::from_toml("[proxy]\nlisten = ").is_err());
    }

    /// A wrong type in the table names the table and the key, wherever the key sits.
    #[test]
    fn a_wrong_type_names_its_key() {
        let file = "max_repeats = 3\n[proxy]\nupstream = \"http://u\"\nlisten = 5\n";
        let text = ProxyConfig::from_toml(file).unwrap_err().to_string();
        assert!(text.contains("[proxy] listen: invalid type"), "{text}");
    }
}
