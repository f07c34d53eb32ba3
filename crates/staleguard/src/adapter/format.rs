//! The request wire formats, by name.

use std::str::FromStr;

/// A request wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RequestFormat {
    /// Tell the format from the body.
    Auto,
    /// OpenAI Chat Completions (`messages` with `tool_calls` and `role: "tool"`).
    OpenAiChat,
    /// Anthropic Messages (`tool_use` / `tool_result` blocks).
    Anthropic,
    /// OpenAI Responses (`input` items).
    Responses,
    /// Google Gemini `generateContent` (`contents` with `functionCall` /
    /// `functionResponse` parts).
    Gemini,
}

impl RequestFormat {
    /// The names [`FromStr`] takes, for help and error texts.
    pub const NAMES: &'static str = "auto, openai, anthropic, responses, gemini";

    /// The format's name, as [`FromStr`] takes it and reports print it.
    pub fn name(self) -> &'static str {
        match self {
            RequestFormat::Auto => "auto",
            RequestFormat::OpenAiChat => "openai",
            RequestFormat::Anthropic => "anthropic",
            RequestFormat::Responses => "responses",
            RequestFormat::Gemini => "gemini",
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
            "gemini" => Ok(RequestFormat::Gemini),
            _ => Err(format!("unknown format {s:?} (supported: {})", Self::NAMES)),
        }
    }
}
