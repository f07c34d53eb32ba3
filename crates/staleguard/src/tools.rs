//! The browser tool set: which tool calls are browser calls.

use wildmatch::WildMatch;

/// Default patterns: Playwright MCP, Chrome DevTools MCP, agent-browser and a tool named
/// `browser`. MCP prefixes (`mcp__playwright__`, `playwright__`) are stripped before matching.
pub const DEFAULT_BROWSER_TOOLS: &[&str] = &[
    "browser",
    "browser_*",
    "agent_browser*",
    "agent-browser*",
    // Chrome DevTools MCP
    "take_snapshot",
    "take_screenshot",
    "click",
    "fill",
    "fill_form",
    "hover",
    "drag",
    "press_key",
    "upload_file",
    "handle_dialog",
    "navigate_page",
    "navigate_page_history",
    "new_page",
    "select_page",
    "close_page",
    "list_pages",
    "wait_for",
    "evaluate_script",
];

/// Compiled browser tool patterns.
#[derive(Debug, Clone)]
pub struct BrowserTools {
    patterns: Vec<WildMatch>,
}

impl BrowserTools {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Self {
        BrowserTools {
            patterns: patterns.iter().map(|p| WildMatch::new(p.as_ref())).collect(),
        }
    }

    /// True when `name`, with any MCP server prefix removed, matches a pattern.
    pub fn is_browser(&self, name: &str) -> bool {
        let base = strip_mcp_prefix(name);
        self.patterns.iter().any(|p| p.matches(base) || p.matches(name))
    }
}

/// `mcp__playwright__browser_click` and `playwright__browser_click` name `browser_click`.
pub fn strip_mcp_prefix(name: &str) -> &str {
    match name.rfind("__") {
        Some(i) => &name[i + 2..],
        None => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_set() {
        let t = BrowserTools::new(DEFAULT_BROWSER_TOOLS);
        for name in [
            "browser_click",
            "mcp__playwright__browser_click",
            "playwright__browser_snapshot",
            "take_snapshot",
            "mcp__chrome-devtools__click",
            "browser",
        ] {
            assert!(t.is_browser(name), "{name}");
        }
        for name in ["read_file", "clicker", "web_search", "mcp__fs__read_file", ""] {
            assert!(!t.is_browser(name), "{name}");
        }
    }

    #[test]
    fn custom_patterns() {
        let t = BrowserTools::new(&["my_*"]);
        assert!(t.is_browser("my_browser"));
        assert!(!t.is_browser("browser_click"));
    }
}
