//! The native half of the npm package `staleguard` (Node-API, by napi-rs).
//!
//! Every function takes the request as JSON text (or a `Buffer` of it) and the config as
//! the text of a `staleguard.toml`, so the loading rules are the core's own; the JavaScript
//! half (`lib/`) turns objects and paths into those. A request or config staleguard cannot
//! read is not thrown from here: it comes back as a [`Failure`] that the JavaScript half
//! raises as the matching `StaleguardError` subclass, with the JSON position as fields.
//! Nothing panics across the boundary: the core never panics on input, and should it still
//! (a bug), the panic is caught here and raised as an `InternalError`; unwinding into Node
//! aborts the whole process.

// napi-derive's expansions call Node-API through `unsafe` blocks of their own.
#![allow(unsafe_code)]

use napi::bindgen_prelude::{Buffer, Either};
use napi_derive::napi;
use staleguard::{Config, Options, Projection, RequestFormat, Verdict};
use staleguard_cli::inspect;

/// Why a call failed, for the JavaScript half to raise.
#[napi(object)]
pub struct Failure {
    /// `InvalidJSON`, `NotARequest`, `UnknownFormat`, `ConfigValue`, `Internal` (a bug of
    /// staleguard's) or `Staleguard`.
    pub kind: String,
    pub message: String,
    /// Where bad JSON is: 1-based line and column, and byte offset.
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub offset: Option<u32>,
}

impl Failure {
    fn new(kind: &str, message: impl Into<String>) -> Failure {
        Failure {
            kind: kind.into(),
            message: message.into(),
            line: None,
            column: None,
            offset: None,
        }
    }

    fn positioned(message: String, line: usize, column: usize, offset: usize) -> Failure {
        let n = |v: usize| Some(u32::try_from(v).unwrap_or(u32::MAX));
        Failure {
            line: n(line),
            column: n(column),
            offset: n(offset),
            ..Failure::new("InvalidJSON", message)
        }
    }

    fn of_body(error: staleguard::Error) -> Failure {
        match &error {
            staleguard::Error::Json {
                line,
                column,
                offset,
                ..
            } => Failure::positioned(error.to_string(), *line, *column, *offset),
            staleguard::Error::Shape { .. } => Failure::new("NotARequest", error.to_string()),
            staleguard::Error::Call(_) => Failure::new("Staleguard", error.to_string()),
        }
    }
}

type Outcome<T> = Either<T, Failure>;

/// Bytes must be UTF-8 (JSON is); a bad byte is reported where it is, like bad JSON.
fn utf8(body: &[u8]) -> Result<&str, Failure> {
    std::str::from_utf8(body).map_err(|e| {
        let offset = e.valid_up_to();
        let before = &body[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let column = offset - line_start + 1;
        Failure::positioned(
            format!("invalid JSON at line {line}, column {column} (byte {offset}): not UTF-8"),
            line,
            column,
            offset,
        )
    })
}

fn format_of(format: Option<&str>) -> Result<RequestFormat, Failure> {
    format
        .unwrap_or("auto")
        .parse()
        .map_err(|e: String| Failure::new("UnknownFormat", e))
}

/// Defaults, then `config_toml`, then the environment: the layers every host reads.
fn config_of(config_toml: Option<&str>) -> Result<Config, Failure> {
    Config::load(config_toml, |name| std::env::var(name).ok())
        .map_err(|e| Failure::new("ConfigValue", e.to_string()))
}

/// Projects `body` and makes the answer from the body and its projection with `answer`.
fn project_then<T>(
    body: &str,
    format: Option<&str>,
    config_toml: Option<&str>,
    verdicts: bool,
    answer: impl FnOnce(&str, Projection) -> T,
) -> Result<T, Failure> {
    let format = format_of(format)?;
    let config = config_of(config_toml)?;
    let options = Options {
        verdicts,
        ..Options::default()
    };
    staleguard::project(body, format, &config, options)
        .map(|p| answer(body, p))
        .map_err(Failure::of_body)
}

/// What `work` answers, or why it failed; a panic in it (a bug) is an `Internal` failure.
fn outcome<T>(work: impl FnOnce() -> Result<T, Failure>) -> Outcome<T> {
    match staleguard_cli::panics::contain(work) {
        Ok(Ok(value)) => Either::A(value),
        Ok(Err(failure)) => Either::B(failure),
        Err(panicked) => Either::B(Failure::new("Internal", panicked.to_string())),
    }
}

/// The projection of a JSON request body given as a string.
#[napi]
pub fn project_text(
    body: String,
    format: Option<String>,
    config_toml: Option<String>,
) -> Outcome<String> {
    outcome(|| {
        project_then(
            &body,
            format.as_deref(),
            config_toml.as_deref(),
            false,
            |_, p| p.body.into_string(),
        )
    })
}

/// The projection of a JSON request body given as UTF-8 bytes.
#[napi]
pub fn project_buffer(
    body: Buffer,
    format: Option<String>,
    config_toml: Option<String>,
) -> Outcome<Buffer> {
    outcome(|| {
        utf8(&body).and_then(|text| {
            project_then(
                text,
                format.as_deref(),
                config_toml.as_deref(),
                false,
                |_, p| Buffer::from(p.body.into_string().into_bytes()),
            )
        })
    })
}

/// What `staleguard inspect --json` prints about `body`, as JSON text.
#[napi]
pub fn inspect_json(
    body: String,
    format: Option<String>,
    config_toml: Option<String>,
) -> Outcome<String> {
    outcome(|| {
        project_then(
            &body,
            format.as_deref(),
            config_toml.as_deref(),
            true,
            |body, p| inspect::Report::new(body, &p).to_json(),
        )
    })
}

/// The guard's answer about one proposed browser call.
#[napi(object)]
pub struct CallVerdict {
    /// True when the call may go to the browser.
    pub allowed: bool,
    /// `allow`, or why it is refused: `stale_ref`, `unknown_ref`, `reused_ref`,
    /// `needs_snapshot`, `repeated_submission`.
    pub kind: String,
    /// The refusal text for the model, or the note on an allowed call.
    pub reason: Option<String>,
}

/// Asks the guard about `call` (JSON text) proposed after the request `body`.
#[napi]
pub fn check_call(body: String, call: String, config_toml: Option<String>) -> Outcome<CallVerdict> {
    outcome(|| check(&body, &call, config_toml.as_deref()))
}

fn check(body: &str, call: &str, config_toml: Option<&str>) -> Result<CallVerdict, Failure> {
    let engine = staleguard::Engine::new(config_of(config_toml)?);
    let verdict = engine
        .check_proposed(body, RequestFormat::Auto, call)
        .map_err(Failure::of_body)?;
    Ok(match verdict {
        Verdict::Allow { note } => CallVerdict {
            allowed: true,
            kind: "allow".into(),
            reason: note,
        },
        Verdict::Refuse { why, message } => CallVerdict {
            allowed: false,
            kind: why.name().into(),
            reason: Some(message),
        },
    })
}

/// The version of the Rust core this addon was built from.
#[napi]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
