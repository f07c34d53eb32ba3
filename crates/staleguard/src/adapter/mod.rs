//! Wire-format adapters: read a neutral [`Transcript`] out of a request body and write
//! projection edits back. Bytes an adapter does not edit are copied as they are, so unknown
//! fields, key order and formatting survive.

pub mod anthropic;
mod content;
mod lenient;
pub mod openai_chat;
mod request;
pub mod responses;

pub use request::{Hints, WireRequest};

use std::str::FromStr;

use crate::error::Error;
use crate::transcript::Transcript;

/// A request wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestFormat {
    /// Tell the format from the body.
    Auto,
    /// OpenAI Chat Completions (`messages` with `tool_calls` and `role: "tool"`).
    OpenAiChat,
    /// Anthropic Messages (`tool_use` / `tool_result` blocks).
    Anthropic,
    /// OpenAI Responses (`input` items).
    Responses,
}

impl RequestFormat {
    pub const NAMES: &'static str = "auto, openai, anthropic, responses";

    pub fn name(self) -> &'static str {
        match self {
            RequestFormat::Auto => "auto",
            RequestFormat::OpenAiChat => "openai",
            RequestFormat::Anthropic => "anthropic",
            RequestFormat::Responses => "responses",
        }
    }
}

impl FromStr for RequestFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(RequestFormat::Auto),
            "openai" | "chat" => Ok(RequestFormat::OpenAiChat),
            "anthropic" => Ok(RequestFormat::Anthropic),
            "responses" => Ok(RequestFormat::Responses),
            _ => Err(format!("unknown format {s:?} (supported: {})", Self::NAMES)),
        }
    }
}

/// Reads `body` in `format`, telling the format from the body when it is `Auto`.
pub fn read_request(
    body: &str,
    format: RequestFormat,
) -> Result<(WireRequest<'_>, RequestFormat, &'static str), Error> {
    let (request, format, reason) = match format {
        RequestFormat::Auto => {
            let chat = openai_chat::read(body)?;
            let (format, reason) = decide(chat.hints)?;
            let request = if format == RequestFormat::OpenAiChat {
                chat
            } else {
                read_as(body, format)?
            };
            (request, format, reason)
        }
        f => (read_as(body, f)?, f, "given"),
    };
    let has_list = match format {
        RequestFormat::Responses => request.hints.has_input,
        _ => request.hints.has_messages,
    };
    if !has_list {
        let list = if format == RequestFormat::Responses {
            "input"
        } else {
            "messages"
        };
        return Err(Error::Shape {
            format: format.name(),
            reason: format!("no `{list}`"),
        });
    }
    Ok((request, format, reason))
}

fn read_as(body: &str, format: RequestFormat) -> Result<WireRequest<'_>, Error> {
    match format {
        RequestFormat::Anthropic => anthropic::read(body),
        RequestFormat::Responses => responses::read(body),
        _ => openai_chat::read(body),
    }
}

/// The neutral transcript of `body`, for callers that run their own analysis.
pub fn read_transcript(body: &str) -> Result<Transcript<'_>, Error> {
    Ok(read_request(body, RequestFormat::Auto)?.0.into_transcript())
}

/// Tells the format from the body alone, and says which rule decided.
pub fn detect_format(body: &str) -> Result<(RequestFormat, &'static str), Error> {
    decide(openai_chat::read(body)?.hints)
}

fn decide(hints: Hints) -> Result<(RequestFormat, &'static str), Error> {
    if !hints.has_messages && hints.has_input {
        return Ok((
            RequestFormat::Responses,
            "top-level `input` and no `messages`",
        ));
    }
    if !hints.has_messages {
        return Err(Error::Shape {
            format: "model request",
            reason: format!(
                "no `messages` or `input` array (supported formats: {})",
                RequestFormat::NAMES
            ),
        });
    }
    if hints.has_system {
        return Ok((
            RequestFormat::Anthropic,
            "top-level `system` or `anthropic_version`",
        ));
    }
    if hints.has_anthropic_blocks {
        return Ok((
            RequestFormat::Anthropic,
            "`tool_use` / `tool_result` content blocks",
        ));
    }
    Ok((
        RequestFormat::OpenAiChat,
        "`messages` without Anthropic content blocks",
    ))
}

/// A syntax error is a JSON error with a position; a wrong shape is a shape error.
pub(crate) fn json_error(err: &serde_json::Error, body: &str, format: &'static str) -> Error {
    if err.is_data() {
        Error::Shape {
            format,
            reason: err.to_string(),
        }
    } else {
        Error::json(err, body)
    }
}

/// A JSON string value, decoded.
pub(crate) fn string_of(raw: &serde_json::value::RawValue) -> Option<std::borrow::Cow<'_, str>> {
    serde_json::from_str(raw.get()).ok()
}

/// Arguments as JSON text: decoded when a string, the raw JSON otherwise.
pub(crate) fn raw_text(raw: Option<&serde_json::value::RawValue>) -> std::borrow::Cow<'_, str> {
    match raw {
        None => std::borrow::Cow::Borrowed(""),
        Some(r) => string_of(r).unwrap_or(std::borrow::Cow::Borrowed(r.get())),
    }
}

/// Content arrays with Anthropic block types mark an Anthropic body.
pub(crate) fn looks_anthropic(content: &serde_json::value::RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct BlockType {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    const TYPES: &[&str] = &["tool_use", "tool_result", "thinking", "redacted_thinking"];
    let json = content.get();
    json.starts_with('[')
        && TYPES.iter().any(|t| json.contains(&format!("\"{t}\"")))
        && serde_json::from_str::<Vec<BlockType>>(json).is_ok_and(|blocks| {
            blocks
                .iter()
                .any(|b| b.kind.as_deref().is_some_and(|k| TYPES.contains(&k)))
        })
}
