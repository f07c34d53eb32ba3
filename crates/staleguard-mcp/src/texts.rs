//! The sentences of the MCP guard's own that a model reads: its refusals, and the messages
//! of the JSON-RPC errors it answers with itself. The relay decides when one is written;
//! their wording is here, to be read in one place.
//!
//! The core's sentences (its guard's refusals, guidance, the history tool's banners) are the
//! core's (`staleguard`'s `texts.rs`); the reasons `jsonrpc.rs` finds a message invalid stay
//! with the grammar that finds them, and `browser_history`'s answers with that tool
//! (`history.rs`).
//!
//! Like the core's texts, these bytes reach the model as they are: change them deliberately.

// ---------------------------------------------------------------------------------------
// Refusals: tool errors in place of a browser call the server never got.
// ---------------------------------------------------------------------------------------

/// The tool a refusal of a scoped ref asks the model to call for a fresh snapshot:
/// Playwright MCP's, the core's default `ObservationFormat::snapshot_tool`
/// (`crates/staleguard/src/observation/model.rs`). Every format whose refs the relay scopes
/// keeps that default: the only other tool, Chrome DevTools MCP's `take_snapshot`, belongs
/// to a format whose uids are never reused (`refs_unique`), so never scoped.
pub(crate) const SNAPSHOT_TOOL: &str = "browser_snapshot";

/// A call whose scoped ref `value` names another document than the newest: `origin` says
/// which ([`from_older_page`], [`FROM_NO_PAGE`]), `newest` is the newest ([`document`],
/// [`NO_PAGE_YET`]).
pub(crate) fn foreign_ref(value: &str, origin: &str, newest: &str) -> String {
    format!(
        "staleguard refused this call: ref {value} {origin}. The newest page is {newest}. Take a fresh snapshot ({SNAPSHOT_TOOL}) and act only on the refs it shows."
    )
}

/// Where a refused scoped ref came from: an older `document`.
pub(crate) fn from_older_page(document: &str) -> String {
    format!("comes from an older page ({document}); it is stale")
}

/// Where a refused scoped ref came from: a document number the relay never gave.
pub(crate) const FROM_NO_PAGE: &str = "names no page the model has seen";

/// A document the model has seen, by its number, newest observation ID and URL.
pub(crate) fn document(number: u32, observation: &str, url: &str) -> String {
    format!("document {number}, observation {observation} at {url}")
}

/// A document the relay no longer keeps, by its number alone.
pub(crate) fn document_forgotten(number: u32) -> String {
    format!("document {number}")
}

/// The newest page, before the model has seen any.
pub(crate) const NO_PAGE_YET: &str = "no page yet";

/// Follows the core's refusal of a call that needs a fresh snapshot first: the relay could
/// not take one itself.
pub(crate) const COULD_NOT_SNAPSHOT: &str = " (staleguard could not take one for you.)";

/// A held call refused because the server did not answer the relay's own snapshot in time;
/// `tool` takes a snapshot on the page's server.
pub(crate) fn snapshot_timed_out(tool: &str) -> String {
    format!("staleguard refused this call: the newest page state has no inline snapshot, and the server did not answer a fresh snapshot in time, so the page's refs are unknown. Take a fresh snapshot ({tool}) and act on the refs it shows.")
}

// ---------------------------------------------------------------------------------------
// JSON-RPC errors the relay answers with itself.
// ---------------------------------------------------------------------------------------

/// What the model reads when the relay failed on its request before sending it on.
pub(crate) const INTERNAL_ERROR_UNSENT: &str = "staleguard mcp: internal error while checking this request (a bug in staleguard, please report it); it was not sent to the browser";

/// What the model reads when the relay failed on the server's answer to its request.
pub(crate) const INTERNAL_ERROR_ANSWER: &str = "staleguard mcp: internal error while reading the browser's answer to this request (a bug in staleguard, please report it); the call may have run: take a fresh snapshot before acting again";

/// A request the server can no longer answer: it `how` (`exited with code 1`, `closed its
/// output`).
pub(crate) fn server_gone(how: &str) -> String {
    format!("staleguard mcp: the browser MCP server {how} before it answered this request")
}

/// The invalid-params error of a `tools/call` whose params are not a name and arguments.
pub(crate) const TOOL_CALL_PARAMS: &str =
    "Invalid params: tools/call takes an object with a string \"name\" and an object \"arguments\"";

/// Why a request is invalid: its id is that of a request not yet answered.
pub(crate) const ID_IN_USE: &str = "its id is already in use by a request not yet answered";

/// Why a batch is invalid: it is empty.
pub(crate) const EMPTY_BATCH: &str = "an empty batch";

/// Why a request in a batch is invalid: MCP has no batches.
pub(crate) const NO_BATCHES: &str = "MCP has no batches: send each message on a line of its own";

/// Why a batch inside a batch is invalid.
pub(crate) const BATCH_IN_BATCH: &str = "a batch in a batch";
