//! The browser tool set: which tool calls are browser calls.
//!
//! [`Config::browser_tools`](crate::Config::browser_tools) holds the patterns; the pipeline
//! compiles them itself, and an [`Engine`](crate::Engine) keeps them compiled for a host that
//! asks about calls one by one ([`Engine::is_browser_tool`](crate::Engine::is_browser_tool)).

use wildmatch::WildMatch;

/// Default patterns: Playwright MCP, Chrome DevTools MCP, agent-browser and a tool named
/// `browser`. MCP prefixes (`mcp__playwright__`, `playwright__`) are stripped before matching.
pub(crate) const DEFAULT_BROWSER_TOOLS: &[&str] = &[
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
    "type_text",
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
    "resize_page",
    "emulate",
];

/// The tool the MCP guard adds to the server's: read-only copies of older observations.
pub const HISTORY_TOOL: &str = "browser_history";

/// True for a tool of staleguard's own (behind any MCP prefix): reading its history acts on
/// no page, so it is no browser step for progress and no page state for the guard.
pub(crate) fn is_own(name: &str) -> bool {
    bare_names(name).any(|n| n == HISTORY_TOOL)
}

/// Playwright MCP's search in the live page.
pub(crate) const FIND_TOOL: &str = "browser_find";

/// Playwright MCP's `browser_find`, behind any MCP prefix: a search in the page, a look
/// that acts on nothing (SPEC 4).
pub(crate) fn is_find(name: &str) -> bool {
    bare_names(name).any(|n| n == FIND_TOOL)
}

/// `browser_snapshot`, `take_snapshot` and the like, behind any MCP prefix: it only reads
/// the page, and its arguments may ask for part of it.
pub(crate) fn is_snapshot_tool(name: &str) -> bool {
    bare_names(name).any(|n| n.ends_with("snapshot"))
}

/// Default patterns of the tools whose results may carry pages by their content (a file
/// read, a shell command): any tool.
pub(crate) const DEFAULT_PAGE_TOOLS: &[&str] = &["*"];

/// Compiled browser tool patterns, and the patterns of the other tools whose results may
/// carry pages.
#[derive(Debug, Clone)]
pub struct BrowserTools {
    patterns: Vec<WildMatch>,
    pages: Vec<WildMatch>,
}

fn compile<S: AsRef<str>>(patterns: &[S]) -> Vec<WildMatch> {
    patterns
        .iter()
        .map(|p| WildMatch::new(p.as_ref()))
        .collect()
}

impl BrowserTools {
    /// Compiles `patterns`: tool names with `*` and `?` wildcards. Any other tool's
    /// results may carry pages ([`with_page_tools`](Self::with_page_tools) narrows that).
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> Self {
        BrowserTools {
            patterns: compile(patterns),
            pages: compile(DEFAULT_PAGE_TOOLS),
        }
    }

    /// Only tools that match `patterns` (besides browser tools) may carry pages in their
    /// results; an empty list turns finding pages by content off.
    pub fn with_page_tools<S: AsRef<str>>(mut self, patterns: &[S]) -> Self {
        self.pages = compile(patterns);
        self
    }

    /// True when a result of `name` may carry a page by its content (SPEC 1).
    pub fn carries_pages(&self, name: &str) -> bool {
        bare_names(name).any(|n| self.pages.iter().any(|p| p.matches(n)))
    }

    /// True when `name`, or a name it goes by under an MCP client's prefix
    /// (`bare_names`), matches a pattern.
    pub fn is_browser(&self, name: &str) -> bool {
        bare_names(name).any(|n| self.patterns.iter().any(|p| p.matches(n)))
    }
}

/// The names a tool may go by behind an MCP client's prefix: the name itself, what follows
/// the last `__` (Claude Code's `mcp__playwright__browser_click`), and for Gemini CLI's
/// `mcp_<server>_<tool>` what follows each `_` after `mcp_`, because a server's name may
/// hold a `_` itself (`mcp_browser_click` is `click` of server `browser`,
/// `mcp_pw_browser_click` is `browser_click` of server `pw`).
pub(crate) fn bare_names(name: &str) -> impl Iterator<Item = &str> {
    let claude = Some(strip_mcp_prefix(name)).filter(|&n| n != name);
    let gemini = name
        .strip_prefix("mcp_")
        .filter(|rest| !rest.starts_with('_'))
        .into_iter()
        .flat_map(|rest| {
            rest.match_indices('_')
                .filter_map(move |(i, _)| rest.get(i + 1..))
        })
        .filter(|n| !n.is_empty());
    std::iter::once(name)
        .chain(claude)
        .chain(gemini)
        .chain(server_prefixed(name))
}

/// Words in a server name that say it drives a browser: opencode's `<server>_<tool>` names
/// take their prefix from the user's config, and only a browser server's one-word tools
/// (`chrome-devtools_click`) are taken for browser tools.
const BROWSER_SERVER_WORDS: &[&str] = &["browser", "playwright", "chrome", "devtools", "puppeteer"];

/// opencode names an MCP tool `<server>_<tool>` (`playwright_browser_click`): what follows a
/// `_` is a bare name when it reads as one of a browser server's own, `browser...` or
/// `agent...`, or when the part before it names a browser server. `github_close_page` stays
/// what it is.
fn server_prefixed(name: &str) -> impl Iterator<Item = &str> {
    let browser_server = |server: &str| {
        let server = server.to_ascii_lowercase();
        BROWSER_SERVER_WORDS.iter().any(|w| server.contains(w))
    };
    name.match_indices('_').filter_map(move |(i, _)| {
        let (server, rest) = (name.get(..i)?, name.get(i + 1..)?);
        let own = rest.starts_with("browser") || rest.starts_with("agent");
        (!server.is_empty() && !rest.is_empty() && (own || browser_server(server))).then_some(rest)
    })
}

/// `mcp__playwright__browser_click` and `playwright__browser_click` name `browser_click`.
pub(crate) fn strip_mcp_prefix(name: &str) -> &str {
    // A byte search: `rfind` with a string pattern sets up a full substring searcher, and
    // this runs for every tool result.
    match name.as_bytes().windows(2).rposition(|w| w == b"__") {
        Some(i) => name.get(i + 2..).unwrap_or(name),
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
        for name in [
            "read_file",
            "clicker",
            "web_search",
            "mcp__fs__read_file",
            "",
        ] {
            assert!(!t.is_browser(name), "{name}");
        }
    }

    #[test]
    fn prefix_is_cut_at_the_last_double_underscore() {
        for name in [
            "",
            "_",
            "__",
            "___",
            "a___b",
            "__x",
            "x__",
            "mcp__a__b",
            "é__ü",
            "a_b",
        ] {
            let expected = name.rfind("__").map_or(name, |i| &name[i + 2..]);
            assert_eq!(strip_mcp_prefix(name), expected, "{name}");
        }
    }

    #[test]
    fn gemini_cli_names_its_mcp_tools_mcp_server_tool() {
        let t = BrowserTools::new(DEFAULT_BROWSER_TOOLS);
        for name in [
            "mcp_browser_click",
            "mcp_chrome-devtools_take_snapshot",
            "mcp_my_server_navigate_page",
            "mcp_playwright_browser_click",
        ] {
            assert!(t.is_browser(name), "{name}");
        }
        for name in [
            "mcp_fs_read_file",
            "mcp_github_create_pull_request",
            "mcp_",
            "mcp_x_",
        ] {
            assert!(!t.is_browser(name), "{name}");
        }
        assert!(is_own("mcp_browser_browser_history"));
        assert!(is_own("mcp__playwright__browser_history"));
        assert!(!is_own("mcp_browser_history_x"));
    }

    /// Every client's spelling of the same tools, as each writes them into a request.
    #[test]
    fn each_client_spells_browser_tools_its_own_way() {
        let t = BrowserTools::new(DEFAULT_BROWSER_TOOLS);
        let clients = [
            ("bare", "browser_click"),
            ("Claude Code", "mcp__playwright__browser_click"),
            ("Claude Code, any server name", "mcp__pw__browser_snapshot"),
            ("Gemini CLI", "mcp_playwright_browser_click"),
            ("Gemini CLI, cdmcp", "mcp_chrome-devtools_take_snapshot"),
            ("server__tool", "playwright__browser_click"),
            ("opencode", "playwright_browser_click"),
            ("opencode, other server name", "pw_browser_navigate"),
            ("opencode, cdmcp", "chrome-devtools_click"),
            (
                "opencode, cdmcp underscored",
                "chrome_devtools_take_snapshot",
            ),
            ("agent-browser", "agent_browser_click"),
        ];
        for (client, name) in clients {
            assert!(t.is_browser(name), "{client}: {name}");
        }
        for name in [
            "github_close_page",
            "fs_read_file",
            "double_click",
            "my_tool_fill",
            "read",
            "bash",
        ] {
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
