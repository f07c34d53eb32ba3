//! The recorded scenarios, written once for the tests and benches of every crate: the
//! tests' support declares this file, and the CLI's tests (`tests/common`), the bench
//! request (`benches/support/request.rs`) and the MCP relay bench include it with `#[path]`.

/// The scenarios recorded with every server (`fixtures/README.md`), in its order: a folder
/// such as `fixtures/pwmcp-0.0.41` holds `<scenario>.openai.json` and the rest of each.
/// Chrome DevTools MCP has one more, `order_inline`.
pub(crate) const SCENARIOS: [&str; 6] = [
    "order",
    "research",
    "rerender",
    "invalid_form",
    "tabs_iframe",
    "long_page",
];
