//! The `[mcp]` table of `staleguard.toml`: the guard's own settings, next to the core keys
//! that [`staleguard::Config`] reads from the same file text.

use serde::Deserialize;
use staleguard::ConfigError;

/// Settings of the MCP guard from the `[mcp]` table. Unset keys take the guard's defaults
/// (see [`crate::Options::new`]); `staleguard mcp` flags win over them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpConfig {
    /// Refuse stale refs and repeated submissions (default on).
    pub guard: Option<bool>,
    /// Rewrite refs to document-scoped forms such as `d3e7` (default on).
    pub namespace_refs: Option<bool>,
    /// Offer the read-only `browser_history` tool (default on).
    pub history_tool: Option<bool>,
    /// Observations kept for the guard and the history tool (default 200).
    pub max_observations: Option<usize>,
    /// Seconds a call waits for the guard's own snapshot before it is refused (default 30).
    pub snapshot_timeout_secs: Option<u64>,
    /// Bound of the memo of result readings, in bytes (default 32 MiB).
    pub memo_bytes: Option<usize>,
}

/// The file as the guard sees it: its table, every other key left to the core.
#[derive(Deserialize)]
struct File {
    mcp: Option<McpConfig>,
}

impl McpConfig {
    /// Reads the `[mcp]` table from the text of a `staleguard.toml`; no table gives the
    /// defaults. Unknown keys inside the table are refused, keys outside it are not looked
    /// at (they are [`staleguard::Config::load`]'s to check).
    pub fn from_toml(text: &str) -> Result<McpConfig, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|span| span.start);
            ConfigError::in_table(text, "mcp", e.message(), at)
        })?;
        Ok(file.mcp.unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_table() {
        let file = "max_repeats = 5\n[proxy]\nlisten = \"x\"\n[mcp]\nguard = false\nmax_observations = 20\nmemo_bytes = 4096";
        let c = McpConfig::from_toml(file).unwrap();
        assert_eq!(c.guard, Some(false));
        assert_eq!(c.max_observations, Some(20));
        assert_eq!(c.memo_bytes, Some(4096));
        assert_eq!(c.namespace_refs, None);
        assert_eq!(McpConfig::from_toml("").unwrap(), McpConfig::default());
        assert_eq!(
            McpConfig::from_toml("max_repeats = 3").unwrap(),
            McpConfig::default()
        );
    }

    #[test]
    fn options_follow_the_table() {
        let defaults = crate::Options::new(staleguard::Config::default(), &McpConfig::default());
        assert!(defaults.guard && defaults.namespace_refs && defaults.history_tool);
        assert_eq!(defaults.max_observations, 200);
        assert_eq!(defaults.snapshot_timeout.as_secs(), 30);
        assert_eq!(defaults.memo_bytes, crate::relay::DEFAULT_MEMO_BYTES);
        let table = McpConfig::from_toml(
            "[mcp]\nguard = false\nhistory_tool = false\nmax_observations = 0\nsnapshot_timeout_secs = 5\nmemo_bytes = 0",
        )
        .unwrap();
        let o = crate::Options::new(staleguard::Config::default(), &table);
        assert!(!o.guard && o.namespace_refs && !o.history_tool);
        assert_eq!(o.max_observations, 1, "at least one observation is kept");
        assert_eq!(o.snapshot_timeout.as_secs(), 5);
        assert_eq!(o.memo_bytes, 0);
    }

    #[test]
    fn mcp_table_errors() {
        let err = McpConfig::from_toml("[mcp]\ngaurd = true").unwrap_err();
        assert!(err.to_string().contains("gaurd"), "{err}");
        assert!(err.to_string().starts_with("[mcp] gaurd"), "{err}");
        let err = McpConfig::from_toml("[mcp]\nmax_observations = -1").unwrap_err();
        assert!(
            err.to_string().contains("max_observations") || err.to_string().contains("-1"),
            "{err}"
        );
        let err = McpConfig::from_toml("mcp = true").unwrap_err();
        assert!(err.to_string().contains("McpConfig"), "{err}");
        assert!(McpConfig::from_toml("[mcp]\nguard = ").is_err());
    }

    /// A wrong type in the table names the table and the key, wherever the key sits.
    #[test]
    fn a_wrong_type_names_its_key() {
        let file = "max_repeats = 3\n[mcp]\nguard = false\nmax_observations = \"many\"\n";
        let text = McpConfig::from_toml(file).unwrap_err().to_string();
        assert!(
            text.contains("[mcp] max_observations: invalid type"),
            "{text}"
        );
    }
}
