//! Typed errors of the core library.

use thiserror::Error;

/// Why a request body could not be read.
#[derive(Debug, Error)]
pub enum Error {
    /// The body is not valid JSON.
    #[error("invalid JSON at line {line}, column {column} (byte {offset}): {message}")]
    Json {
        /// Line of the error, 1-based.
        line: usize,
        /// Column of the error, 1-based, in bytes.
        column: usize,
        /// Byte offset of the error in the body.
        offset: usize,
        /// What serde_json found wrong, without its position.
        message: String,
    },
    /// Valid JSON, but not a request body this format can read.
    #[error("not {} request body: {reason}", with_article(format))]
    Shape {
        /// The format it was read as ([`RequestFormat::name`](crate::RequestFormat::name)), or
        /// `model` when no format fits (`not a model request body`).
        format: &'static str,
        /// What is missing or of the wrong type.
        reason: String,
    },
    /// A proposed call (`Engine::check_proposed`) that is no JSON or names no tool.
    #[error("{0}")]
    Call(String),
}

impl Error {
    /// Builds [`Error::Json`] from a serde_json error, with the byte offset in `body`.
    pub fn json(err: &serde_json::Error, body: &str) -> Self {
        let (line, column) = (err.line(), err.column());
        Error::Json {
            line,
            column,
            offset: byte_offset(body, line, column),
            message: strip_position(&err.to_string()),
        }
    }

    /// A proposed call that is no JSON.
    pub(crate) fn call_not_json(e: serde_json::Error) -> Self {
        Error::Call(format!("call is not JSON: {e}"))
    }

    /// A proposed call that names no tool.
    pub(crate) fn call_names_no_tool() -> Self {
        Error::Call(
            "call names no tool: give an OpenAI tool_calls entry, an Anthropic tool_use block or a Responses function_call item".into(),
        )
    }
}

/// `an anthropic`, `a gemini`: a format's name after the article English gives it.
fn with_article(name: &str) -> String {
    let vowel = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if vowel { "an" } else { "a" })
}

/// serde_json reports 1-based line and column (column counts bytes); turns them into an offset.
fn byte_offset(body: &str, line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        memchr::memchr_iter(b'\n', body.as_bytes())
            .nth(line - 2)
            .map_or(body.len(), |i| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(body.len())
}

/// serde_json appends " at line L column C"; we print the position ourselves.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// An environment variable holds a value that is not allowed for it.
    #[error("environment variable {name}={value:?} is invalid: {expected}")]
    Env {
        /// The variable's name.
        name: String,
        /// The value it holds.
        value: String,
        /// What values it may hold.
        expected: &'static str,
    },
    /// The config (a file, or the text a binding made of an object) is not valid TOML or has
    /// an unknown key or a wrong type. Its text names the key or the line; a host that read
    /// a file puts the file's name before it.
    #[error("{0}")]
    File(String),
}

impl ConfigError {
    /// An error in a host's own table of the config file (`[proxy]`, `[mcp]`), which the
    /// host reads itself: named by its table and the key on the line where the parser found
    /// it (`at`, a byte offset into the file's `text`), as the core names its own keys:
    /// `[proxy] listen: invalid type: integer `5`, expected a string`.
    ///
    /// ```
    /// use staleguard::ConfigError;
    ///
    /// let text = "[proxy]\nlisten = 5\n";
    /// let at = text.find("5");
    /// let error = ConfigError::in_table(text, "proxy", "invalid type: integer `5`", at);
    /// assert_eq!(error.to_string(), "[proxy] listen: invalid type: integer `5`");
    /// ```
    pub fn in_table(text: &str, table: &str, message: &str, at: Option<usize>) -> ConfigError {
        let message = message.trim_end();
        let key = at
            .and_then(|at| text.get(..at))
            .and_then(|before| {
                let start = before.rfind('\n').map_or(0, |i| i + 1);
                let line = text.get(start..)?.lines().next()?;
                let (key, _) = line.split_once('=')?;
                Some(key.trim())
            })
            .filter(|key| !key.is_empty() && !key.starts_with('['));
        match key {
            Some(key) => ConfigError::File(format!("[{table}] {key}: {message}")),
            None => ConfigError::File(format!("[{table}]: {message}")),
        }
    }
}
