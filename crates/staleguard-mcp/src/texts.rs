//! The sentences of the MCP guard that a model reads.

/// What the model reads when the relay failed on its request before sending it on.
pub(crate) const INTERNAL_ERROR_UNSENT: &str = "staleguard mcp: internal error while checking this request (a bug in staleguard, please report it); it was not sent to the browser";

/// What the model reads when the relay failed on the server's answer to its request.
pub(crate) const INTERNAL_ERROR_ANSWER: &str = "staleguard mcp: internal error while reading the browser's answer to this request (a bug in staleguard, please report it); the call may have run: take a fresh snapshot before acting again";
