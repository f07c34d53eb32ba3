//! Reading a body: the format told from the body or given, the format's reader, and the
//! checks every format shares.

use crate::error::Error;
use crate::transcript::Transcript;

use super::format::RequestFormat;
use super::request::{Hints, ResumeAt, WireRequest};
use super::{anthropic, gemini, openai_chat, responses};

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
    let (has_list, list) = match format {
        RequestFormat::Responses => (request.hints.has_input, "input"),
        RequestFormat::Gemini => (request.hints.has_contents, "contents"),
        _ => (request.hints.has_messages, "messages"),
    };
    if !has_list {
        return Err(Error::Shape {
            format: format.name(),
            reason: format!("no `{list}`"),
        });
    }
    Ok((request, format, reason))
}

/// Reads `body` from `at` on, for a body whose bytes before `at.offset` are those of the
/// body `at` was taken from (the caller checks that; this never looks at them). Items
/// before `at.item` are [`Item::Other`](crate::transcript::Item::Other) with no span and
/// no block, so every item index is what a full read gives; hints and breakpoints are the
/// full read's.
///
/// `None` when the rest cannot be read exactly as a full read in `format` would read it:
/// `format` is not the one `at` was read in (`Auto` included), invalid JSON, a second
/// `messages` or known top-level key, bytes after the body, another shape. The caller then
/// reads the body in full, which gives the same answer or error.
#[doc(hidden)]
pub fn read_request_from<'a>(
    body: &'a str,
    format: RequestFormat,
    at: &ResumeAt,
) -> Option<WireRequest<'a>> {
    if format != at.format {
        return None;
    }
    match format {
        RequestFormat::OpenAiChat => openai_chat::read_from(body, at),
        RequestFormat::Anthropic => anthropic::read_from(body, at),
        _ => None,
    }
}

fn read_as(body: &str, format: RequestFormat) -> Result<WireRequest<'_>, Error> {
    match format {
        RequestFormat::Anthropic => anthropic::read(body),
        RequestFormat::Responses => responses::read(body),
        RequestFormat::Gemini => gemini::read(body),
        _ => openai_chat::read(body),
    }
}

/// The neutral transcript of `body`, for callers that run their own analysis.
pub fn read_transcript(body: &str) -> Result<Transcript<'_>, Error> {
    Ok(read_request(body, RequestFormat::Auto)?.0.into_transcript())
}

fn decide(hints: Hints) -> Result<(RequestFormat, &'static str), Error> {
    if !hints.has_messages && hints.has_input {
        return Ok((
            RequestFormat::Responses,
            "top-level `input` and no `messages`",
        ));
    }
    if !hints.has_messages && !hints.has_input && hints.has_contents {
        return Ok((RequestFormat::Gemini, "top-level `contents` with `parts`"));
    }
    if !hints.has_messages && !hints.has_input && hints.wrapped_contents {
        return Ok((
            RequestFormat::Gemini,
            "`request.contents` with `parts` (Gemini Code Assist)",
        ));
    }
    if !hints.has_messages {
        return Err(Error::Shape {
            format: "model",
            reason: format!(
                "no `messages` or `input` array, nor `contents` (supported formats: {})",
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
