//! Configuration (SPEC 7): defaults, then a `staleguard.toml` file, then the environment.
//!
//! The core does no I/O: callers pass the file's text and a lookup for environment
//! variables, so tests and servers decide where both come from.
//!
//! [`Config`] is re-exported at the crate root. Hosts load it with [`Config::load`] from the
//! same text and environment they read their own settings from; [`parse_switch`] is the
//! strict on/off reading every layer uses.

use crate::error::ConfigError;
use crate::tools::{BrowserTools, DEFAULT_BROWSER_TOOLS, DEFAULT_PAGE_TOOLS};

/// Every setting of the staleguard core. `Default` gives the documented defaults. The
/// hosts' settings (the `[proxy]` and `[mcp]` tables) are read by the hosts.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Config {
    /// The hosts' switch: the proxy projects only when it is on. Off by
    /// default (SPEC 7). A library call such as [`crate::project`] projects regardless.
    pub browser_history_compaction: bool,
    /// Keep grounded quotes from collapsed pages; `None` is on (for hosts: when compaction is).
    pub evidence_retention: Option<bool>,
    /// Track page fingerprints and stalls; `None` is on (for hosts: when compaction is).
    pub progress_tracking: Option<bool>,
    /// Browser results in a row that leave the page fingerprint unchanged before the
    /// session counts as stalled and the model gets guidance (3).
    pub max_repeats: u32,
    /// Bytes of a receipt line (200); a longer one is cut in the middle, visibly.
    pub receipt_max_bytes: usize,
    /// Bytes of quote lines on the evidence track (32 KiB).
    pub evidence_max_bytes: usize,
    /// Quotes on the evidence track (64).
    pub evidence_max_items: usize,
    /// Bytes of one quote (2 KiB): a longer chunk is refused whole, with a notice, never
    /// clipped.
    pub evidence_max_quote_bytes: usize,
    /// A budget for the projected body, in bytes: only the evidence block gives way, whole
    /// quotes left out (with a notice) until the body fits. `None` (the default): no budget.
    pub request_budget_bytes: Option<usize>,
    /// Tool name patterns (`*` wildcards) that make a call a browser call.
    pub browser_tools: Vec<String>,
    /// Tool name patterns of the other tools whose results are taken for pages when their
    /// text is a page tree (a snapshot file read back through `Read`, `cat`, `read_file`);
    /// `["*"]`, any tool, by default; empty turns it off (SPEC 1).
    pub page_tools: Vec<String>,
    /// Whether the MCP guard stands between the model and the browser, so that a collapse
    /// that would rewrite more than it saves may wait (SPEC 9, C5). `None` (the default):
    /// when the request offers the guard's `browser_history` tool.
    pub guard_in_front: Option<bool>,
    /// How the newest observation is sent (SPEC 2 "Lean live page"): lean on pages of at
    /// least [`lean_min_bytes`](Self::lean_min_bytes) (the default), or whole.
    pub live_page: LivePage,
    /// Bytes under which a live page is always sent whole (8 KiB).
    pub lean_min_bytes: usize,
}

/// How the newest observation is sent (SPEC 2 "Lean live page").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum LivePage {
    /// As the server wrote it.
    Whole,
    /// Every control and the path to it, the prose that answers the task, the rest folded
    /// with a marker saying how to read it back (the default).
    #[default]
    Lean,
}

impl LivePage {
    /// `whole` or `lean`.
    pub fn as_str(self) -> &'static str {
        match self {
            LivePage::Whole => "whole",
            LivePage::Lean => "lean",
        }
    }

    fn parse(value: &str) -> Option<LivePage> {
        match value.trim().to_ascii_lowercase().as_str() {
            "whole" => Some(LivePage::Whole),
            "lean" => Some(LivePage::Lean),
            _ => None,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            browser_history_compaction: false,
            evidence_retention: None,
            progress_tracking: None,
            max_repeats: 3,
            receipt_max_bytes: 200,
            evidence_max_bytes: 32 * 1024,
            evidence_max_items: 64,
            evidence_max_quote_bytes: 2 * 1024,
            request_budget_bytes: None,
            browser_tools: DEFAULT_BROWSER_TOOLS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            page_tools: DEFAULT_PAGE_TOOLS.iter().map(|s| s.to_string()).collect(),
            guard_in_front: None,
            live_page: LivePage::Lean,
            lean_min_bytes: DEFAULT_LEAN_MIN_BYTES,
        }
    }
}

/// Pages under this many bytes are never made lean (SPEC 2).
const DEFAULT_LEAN_MIN_BYTES: usize = 8 * 1024;

const SWITCH_EXPECTED: &str = "expected on|true|1|yes or off|false|0|no";

/// The keys of the file layer. The `[proxy]` and `[mcp]` tables belong to the hosts, which
/// read and check them from the same text (`staleguard_proxy::ProxyConfig`,
/// `staleguard_mcp::McpConfig`); the core skips them. Any other key is refused.
const FILE_KEYS: &str = "browser_history_compaction, evidence_retention, progress_tracking, max_repeats, receipt_max_bytes, evidence_max_bytes, evidence_max_items, evidence_max_quote_bytes, request_budget_bytes, browser_tools, page_tools, guard_in_front, live_page, lean_min_bytes, [proxy], [mcp]";

/// One key's value as `T`; a value of the wrong type is an error that names the key.
fn typed<T: serde::de::DeserializeOwned>(key: &str, value: toml::Value) -> Result<T, ConfigError> {
    value
        .try_into()
        .map_err(|e: toml::de::Error| ConfigError::File(format!("{key}: {}", e.message())))
}

/// An on/off value in the file: a TOML boolean or one of the on/off words.
fn switch(key: &str, value: toml::Value) -> Result<bool, ConfigError> {
    match value {
        toml::Value::Boolean(b) => Ok(b),
        toml::Value::String(w) => parse_switch(&w)
            .ok_or_else(|| ConfigError::File(format!("{key} = {w:?}: {SWITCH_EXPECTED}"))),
        other => Err(ConfigError::File(format!(
            "{key}: invalid type: {}, expected a boolean or one of on|true|1|yes or off|false|0|no",
            other.type_str()
        ))),
    }
}

/// A TOML syntax error, with the line it is on (the parser's message says what is wrong).
fn syntax_error(text: &str, e: &toml::de::Error) -> ConfigError {
    let message = e.message().trim_end();
    match e.span().and_then(|span| text.get(..span.start)) {
        Some(before) => {
            let line = before.matches('\n').count() + 1;
            ConfigError::File(format!("line {line}: {message}"))
        }
        None => ConfigError::File(message.to_string()),
    }
}

/// Strict on/off parsing: anything else is `None`, never on.
pub(crate) fn parse_switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" | "yes" => Some(true),
        "off" | "false" | "0" | "no" => Some(false),
        _ => None,
    }
}

impl Config {
    /// Loads the layers: defaults, then `file` (the text of a `staleguard.toml`), then
    /// the environment as seen through `env`.
    pub fn load(
        file: Option<&str>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let mut config = Config::default();
        if let Some(text) = file {
            config.apply_file(text)?;
        }
        config.apply_env(env)?;
        Ok(config)
    }

    /// Whether a host that follows the config retains evidence: compaction on, evidence
    /// not turned off.
    pub fn evidence_enabled(&self) -> bool {
        self.browser_history_compaction && self.evidence_on()
    }

    /// Whether a host that follows the config tracks progress: compaction on, progress not
    /// turned off.
    pub fn progress_enabled(&self) -> bool {
        self.browser_history_compaction && self.progress_on()
    }

    /// Whether a projection retains evidence: unless it is turned off. An explicit library
    /// call projects whatever `browser_history_compaction` says; that switch is the hosts'.
    pub fn evidence_on(&self) -> bool {
        self.evidence_retention.unwrap_or(true)
    }

    /// Whether a projection tracks progress: unless it is turned off.
    pub fn progress_on(&self) -> bool {
        self.progress_tracking.unwrap_or(true)
    }

    fn apply_file(&mut self, text: &str) -> Result<(), ConfigError> {
        let table: toml::Table = toml::from_str(text).map_err(|e| syntax_error(text, &e))?;
        for (key, value) in table {
            self.apply_key(&key, value)?;
        }
        Ok(())
    }

    /// One key of the file; its value is checked against the key's type here, so an error
    /// names the key.
    fn apply_key(&mut self, key: &str, value: toml::Value) -> Result<(), ConfigError> {
        match key {
            "browser_history_compaction" => self.browser_history_compaction = switch(key, value)?,
            "evidence_retention" => self.evidence_retention = Some(switch(key, value)?),
            "progress_tracking" => self.progress_tracking = Some(switch(key, value)?),
            "max_repeats" => self.max_repeats = typed(key, value)?,
            "receipt_max_bytes" => self.receipt_max_bytes = typed(key, value)?,
            "evidence_max_bytes" => self.evidence_max_bytes = typed(key, value)?,
            "evidence_max_items" => self.evidence_max_items = typed(key, value)?,
            "evidence_max_quote_bytes" => self.evidence_max_quote_bytes = typed(key, value)?,
            "request_budget_bytes" => self.request_budget_bytes = Some(typed(key, value)?),
            "browser_tools" => self.browser_tools = typed(key, value)?,
            "page_tools" => self.page_tools = typed(key, value)?,
            "guard_in_front" => self.guard_in_front = Some(switch(key, value)?),
            "live_page" => self.live_page = live_page(key, value)?,
            "lean_min_bytes" => self.lean_min_bytes = typed(key, value)?,
            "proxy" | "mcp" => {}
            other => {
                return Err(ConfigError::File(format!(
                    "unknown key `{other}`, expected one of {FILE_KEYS}"
                )))
            }
        }
        Ok(())
    }

    fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = env_switch(&env, "BROWSER_HISTORY_COMPACTION")? {
            self.browser_history_compaction = v;
        }
        if let Some(v) = env_switch(&env, "BROWSER_EVIDENCE_RETENTION")? {
            self.evidence_retention = Some(v);
        }
        if let Some(v) = env_switch(&env, "BROWSER_PROGRESS_TRACKING")? {
            self.progress_tracking = Some(v);
        }
        if let Some(v) = env_switch(&env, "STALEGUARD_GUARD_IN_FRONT")? {
            self.guard_in_front = Some(v);
        }
        if let Some(value) = env("STALEGUARD_LIVE_PAGE") {
            self.live_page = LivePage::parse(&value).ok_or(ConfigError::Env {
                name: "STALEGUARD_LIVE_PAGE".to_string(),
                value,
                expected: LIVE_PAGE_EXPECTED,
            })?;
        }
        set(
            &mut self.lean_min_bytes,
            env_number(&env, "STALEGUARD_LEAN_MIN_BYTES")?,
        );
        set(
            &mut self.max_repeats,
            env_number(&env, "STALEGUARD_MAX_REPEATS")?,
        );
        set(
            &mut self.receipt_max_bytes,
            env_number(&env, "STALEGUARD_RECEIPT_MAX_BYTES")?,
        );
        set(
            &mut self.evidence_max_bytes,
            env_number(&env, "STALEGUARD_EVIDENCE_MAX_BYTES")?,
        );
        set(
            &mut self.evidence_max_items,
            env_number(&env, "STALEGUARD_EVIDENCE_MAX_ITEMS")?,
        );
        set(
            &mut self.evidence_max_quote_bytes,
            env_number(&env, "STALEGUARD_EVIDENCE_MAX_QUOTE_BYTES")?,
        );
        if let Some(n) = env_number(&env, "STALEGUARD_REQUEST_BUDGET_BYTES")? {
            self.request_budget_bytes = Some(n);
        }
        if let Some(list) = env("STALEGUARD_BROWSER_TOOLS") {
            self.browser_tools = name_list(&list);
        }
        if let Some(list) = env("STALEGUARD_PAGE_TOOLS") {
            self.page_tools = name_list(&list);
        }
        Ok(())
    }

    /// The tool sets this config names, compiled: browser tools, and the tools whose
    /// results may carry pages.
    pub fn tools(&self) -> BrowserTools {
        BrowserTools::new(&self.browser_tools).with_page_tools(&self.page_tools)
    }
}

const LIVE_PAGE_EXPECTED: &str = "expected whole or lean";

/// The `live_page` key's value.
fn live_page(key: &str, value: toml::Value) -> Result<LivePage, ConfigError> {
    let text: String = typed(key, value)?;
    LivePage::parse(&text)
        .ok_or_else(|| ConfigError::File(format!("{key} = {text:?}: {LIVE_PAGE_EXPECTED}")))
}

/// A comma-separated list of tool name patterns.
fn name_list(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn env_switch(
    env: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<bool>, ConfigError> {
    let Some(value) = env(name) else {
        return Ok(None);
    };
    parse_switch(&value).map(Some).ok_or(ConfigError::Env {
        name: name.to_string(),
        value,
        expected: SWITCH_EXPECTED,
    })
}

fn env_number<T: std::str::FromStr>(
    env: &impl Fn(&str) -> Option<String>,
    name: &str,
) -> Result<Option<T>, ConfigError> {
    let Some(value) = env(name) else {
        return Ok(None);
    };
    value
        .trim()
        .parse()
        .map(Some)
        .map_err(|_| ConfigError::Env {
            name: name.to_string(),
            value,
            expected: "expected a non-negative whole number",
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_are_off_and_documented() {
        let c = Config::load(None, env_of(&[])).unwrap();
        assert!(!c.browser_history_compaction);
        assert!(!c.evidence_enabled() && !c.progress_enabled());
        assert_eq!((c.max_repeats, c.receipt_max_bytes), (3, 200));
        assert_eq!((c.evidence_max_bytes, c.evidence_max_items), (32768, 64));
        assert_eq!(c.evidence_max_quote_bytes, 2048);
        assert_eq!(c.request_budget_bytes, None);
    }

    #[test]
    fn on_off_words_in_any_case() {
        for word in ["on", "TRUE", "1", "Yes"] {
            let c = Config::load(None, env_of(&[("BROWSER_HISTORY_COMPACTION", word)])).unwrap();
            assert!(c.browser_history_compaction, "{word}");
            assert!(c.evidence_enabled() && c.progress_enabled());
        }
        for word in ["off", "False", "0", "NO"] {
            let file = "browser_history_compaction = true";
            let c =
                Config::load(Some(file), env_of(&[("BROWSER_HISTORY_COMPACTION", word)])).unwrap();
            assert!(!c.browser_history_compaction, "{word}");
        }
    }

    #[test]
    fn anything_else_is_an_error_naming_variable_and_value() {
        for word in ["enabled", "", "2", "onn"] {
            let err =
                Config::load(None, env_of(&[("BROWSER_HISTORY_COMPACTION", word)])).unwrap_err();
            let text = err.to_string();
            assert!(text.contains("BROWSER_HISTORY_COMPACTION"), "{text}");
            assert!(text.contains(&format!("{word:?}")), "{text}");
        }
        let err = Config::load(None, env_of(&[("BROWSER_EVIDENCE_RETENTION", "maybe")]));
        assert!(err.is_err());
    }

    #[test]
    fn layers_apply_in_order() {
        let file = "browser_history_compaction = \"on\"\nmax_repeats = 5\nevidence_retention = false\nbrowser_tools = [\"my_browser\"]";
        let c = Config::load(Some(file), env_of(&[])).unwrap();
        assert!(c.browser_history_compaction && !c.evidence_enabled() && c.progress_enabled());
        assert_eq!(c.max_repeats, 5);
        assert_eq!(c.browser_tools, vec!["my_browser".to_string()]);
        let c = Config::load(Some(file), env_of(&[("STALEGUARD_MAX_REPEATS", "7")])).unwrap();
        assert_eq!(c.max_repeats, 7);
    }

    #[test]
    fn host_tables_are_skipped_but_unknown_keys_refused() {
        let file = "max_repeats = 4\n[proxy]\nlisten = \"127.0.0.1:9000\"\nanything = 1\n[mcp]\nguard = false\n[mcp.nested]\nx = 1";
        let c = Config::load(Some(file), env_of(&[])).unwrap();
        assert_eq!(
            c,
            Config {
                max_repeats: 4,
                ..Config::default()
            }
        );
        // The hosts check their own tables; the core checks its keys around them.
        let err =
            Config::load(Some("[mcp]\nguard = 1\n[staleguard]\nx = 1"), env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("staleguard"), "{err}");
        let err =
            Config::load(Some("max_repeat = 3\n[proxy]\nlisten = \"x\""), env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("max_repeat"), "{err}");
        // A syntax error anywhere, tables included, is still the file's error.
        assert!(Config::load(Some("[proxy]\nlisten = "), env_of(&[])).is_err());
    }

    #[test]
    fn file_errors_are_clear() {
        let err = Config::load(Some("max_repeat = 3"), env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("max_repeat"), "{err}");
        let err = Config::load(Some("progress_tracking = \"sometimes\""), env_of(&[])).unwrap_err();
        assert!(err.to_string().contains("sometimes"), "{err}");
        let err = Config::load(None, env_of(&[("STALEGUARD_MAX_REPEATS", "-1")])).unwrap_err();
        assert!(err.to_string().contains("STALEGUARD_MAX_REPEATS"), "{err}");
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_key() {
        for (file, key, what) in [
            ("max_repeats = \"three\"", "max_repeats", "string"),
            ("receipt_max_bytes = -1", "receipt_max_bytes", "-1"),
            ("browser_tools = [\"a\", 1]", "browser_tools", "integer"),
            ("evidence_retention = 5", "evidence_retention", "integer"),
            (
                "request_budget_bytes = 1.5",
                "request_budget_bytes",
                "float",
            ),
        ] {
            let text = Config::load(Some(file), env_of(&[]))
                .unwrap_err()
                .to_string();
            assert!(text.contains(&format!("{key}:")), "{file}: {text}");
            assert!(text.contains(what), "{file}: {text}");
        }
    }

    #[test]
    fn a_syntax_error_says_its_line() {
        let err = Config::load(Some("max_repeats = 3\n\nreceipt_max_bytes = "), env_of(&[]));
        let text = err.unwrap_err().to_string();
        assert!(text.starts_with("line 3: "), "{text}");
    }
}
