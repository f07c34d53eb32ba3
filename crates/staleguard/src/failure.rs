//! Failed browser results (SPEC 1). A failure is never collapsed: it is exactly what must
//! not be summarised away.

use std::sync::LazyLock;

use memchr::memmem::Finder;

/// True when `text` reads as a failed result, whatever the observation format.
pub(crate) fn is_failed(text: &str) -> bool {
    let text = text.trim_start_matches('\u{feff}').trim_start();
    let text = strip_repeated_call(text);
    starts_with_failure(text) || has_error_section(text) || is_failed_batch(text)
}

/// `Unable to navigate` is Chrome DevTools MCP's refused navigation, which it does not flag
/// as an error (`Unable to navigate in the selected page: net::ERR_CONNECTION_REFUSED ...`).
fn starts_with_failure(text: &str) -> bool {
    [
        "Error",
        "Not run:",
        "The user denied",
        "Action cancelled",
        "Unable to navigate",
    ]
    .iter()
    .any(|p| text.starts_with(p))
}

/// The seed system prefixes a repeated call with `Repeated call: ...`; the failure after it
/// (on the same line or the next) still counts.
fn strip_repeated_call(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("Repeated call:") else {
        return text;
    };
    let rest = rest.trim_start_matches([' ', '\t']);
    if starts_with_failure(rest) {
        return rest;
    }
    match rest.find('\n') {
        Some(i) => rest[i + 1..].trim_start(),
        None => rest,
    }
}

/// MCP `isError` rendered as `### Error`, or as `### Result` whose first line is `Error: ...`.
fn has_error_section(text: &str) -> bool {
    // One pass over the `### ` line starts serves both headings; results can be MBs.
    line_starts_found(text, &HEADING).any(|at| {
        let heading = line_at(text, at);
        let next = text.get(at + heading.len() + 1..).unwrap_or("");
        match heading.trim_end() {
            "### Error" => true,
            "### Result" => next.starts_with("Error:"),
            _ => false,
        }
    })
}

/// Finds `### `, the start of every Markdown heading the formats use.
pub(crate) static HEADING: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("### "));

/// Offsets where `finder`'s needle starts a line of `text`. Uses SIMD search: results can be
/// MBs. Finders are built once, in statics: building one costs more than searching a short
/// result.
pub(crate) fn line_starts_found<'t>(
    text: &'t str,
    finder: &'t Finder<'static>,
) -> impl Iterator<Item = usize> + 't {
    let bytes = text.as_bytes();
    finder
        .find_iter(bytes)
        .filter(move |&at| at == 0 || bytes.get(at - 1) == Some(&b'\n'))
}

/// The line of `text` that starts at `at`, without its line break.
pub(crate) fn line_at(text: &str, at: usize) -> &str {
    let rest = text.get(at..).unwrap_or("");
    rest.split('\n').next().unwrap_or("")
}

/// A partial batch: numbered steps whose last one is `N. Error: ... Batch stopped.`,
/// optionally followed by verification lines.
fn is_failed_batch(text: &str) -> bool {
    // Reverse search: only the last lines matter, however long the result.
    let last = text
        .rsplit('\n')
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !is_verification_line(l));
    let Some(last) = last else { return false };
    let Some((number, step)) = last.split_once(". ") else {
        return false;
    };
    !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
        && step.starts_with("Error")
        && step.ends_with("Batch stopped.")
}

/// `[verified:...]` and `[UNVERIFIED...]` lines, which receipts keep.
pub(crate) fn is_verification_line(line: &str) -> bool {
    line.starts_with("[verified:") || line.starts_with("[UNVERIFIED")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_prefixes() {
        assert!(is_failed("Error: Ref e13 not found"));
        assert!(is_failed("  Not run: user stopped"));
        assert!(is_failed("The user denied this action"));
        assert!(is_failed("Action cancelled by user"));
        assert!(!is_failed("Clicked. No Error here"));
        assert!(!is_failed(""));
        assert!(is_failed("Unable to navigate in the selected page: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:8439/.\n## Pages\n1: 127.0.0.1 (chrome-error://chromewebdata/) [selected]"));
    }

    #[test]
    fn mcp_error_sections() {
        assert!(is_failed(
            "### Error\nError: browserBackend.callTool: net::ERR"
        ));
        assert!(is_failed(
            "### Result\nError: Ref e13 not found in the current page snapshot."
        ));
        assert!(is_failed(
            "### Ran Playwright code\n```js\n```\n\n### Result\r\nError: x"
        ));
        assert!(!is_failed("### Result\n- 0: (current) [Home](http://x/)"));
        assert!(!is_failed(
            "### Page\n- paragraph: \"### Error\" is a heading"
        ));
    }

    #[test]
    fn repeated_call_does_not_hide_failure() {
        assert!(is_failed(
            "Repeated call: Error: ref 1-0-31 is not in the current snapshot."
        ));
        assert!(is_failed(
            "Repeated call: click 1-0-31\nError: ref 1-0-31 is stale"
        ));
        assert!(!is_failed("Repeated call: click 1-0-31\nclick complete."));
    }

    #[test]
    fn failed_partial_batch() {
        let text = "1. click complete.\nCurrent snapshot:\n# Confirm order — https://shop.example/confirm\n- [ref=1-0-01] button Place order\n2. Error: stale target 1-0-99. Batch stopped.\n[UNVERIFIED: side effect needs a read-back check.]";
        assert!(is_failed(text));
        assert!(is_failed(
            "1. click complete.\n2. Error: timeout. Batch stopped.\n[verified: URL unchanged]\n"
        ));
        assert!(!is_failed("1. click complete.\n2. type complete."));
        assert!(!is_failed("1. Error: timeout. Batch stopped.\n3. done"));
    }
}
