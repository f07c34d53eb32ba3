//! `staleguard._native`: the Rust half of the Python package.
//!
//! Every function takes the request as text (the Python half turns dicts into JSON and back)
//! and the config as the text of a `staleguard.toml`, so the loading rules are the core's
//! own. Errors become the `StaleguardError` family; nothing panics across the boundary
//! (PyO3 would turn a panic into `PanicException`, which is not a `ValueError`): should the
//! core still panic (a bug), the panic is caught and raised as `InternalError`. `main` is
//! the `staleguard` console script: the CLI's own code, given `sys.argv`.

#![forbid(unsafe_code)]
// pyo3 0.22's `#[pyfunction]` expansion converts `PyErr` into itself (fixed in pyo3 0.23).
#![allow(clippy::useless_conversion)]

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use staleguard::Verdict as GuardVerdict;
use staleguard::{Config, Options, Projection, RequestFormat};
use staleguard_cli::inspect;

create_exception!(
    _native,
    StaleguardError,
    PyValueError,
    "A request, format or config staleguard cannot read."
);
create_exception!(
    _native,
    InvalidJSONError,
    StaleguardError,
    "The body is not valid JSON; `line`, `column` (1-based) and `offset` (byte) say where."
);
create_exception!(
    _native,
    NotARequestError,
    StaleguardError,
    "Valid JSON, but not a request body of a format staleguard reads."
);
create_exception!(
    _native,
    UnknownFormatError,
    StaleguardError,
    "`format` is not one of auto, openai, anthropic, responses or gemini."
);
create_exception!(
    _native,
    ConfigValueError,
    StaleguardError,
    "A config key or value (or an environment variable) is not allowed."
);

create_exception!(
    _native,
    InternalError,
    StaleguardError,
    "A bug in staleguard (it panicked): the request was not projected. Please report it with the input."
);

/// The Python exception for a core error, with the JSON position as attributes.
fn body_error(py: Python<'_>, error: staleguard::Error) -> PyErr {
    match &error {
        staleguard::Error::Json {
            line,
            column,
            offset,
            ..
        } => positioned(py, error.to_string(), *line, *column, *offset),
        staleguard::Error::Shape { .. } => NotARequestError::new_err(error.to_string()),
        staleguard::Error::Call(_) => StaleguardError::new_err(error.to_string()),
    }
}

fn positioned(py: Python<'_>, message: String, line: usize, column: usize, offset: usize) -> PyErr {
    let err = InvalidJSONError::new_err(message);
    let value = err.value_bound(py);
    for (name, n) in [("line", line), ("column", column), ("offset", offset)] {
        if let Err(e) = value.setattr(name, n) {
            return e;
        }
    }
    err
}

/// Bytes must be UTF-8 (JSON is); a bad byte is reported where it is, like bad JSON.
fn utf8<'b>(py: Python<'_>, body: &'b [u8]) -> PyResult<&'b str> {
    std::str::from_utf8(body).map_err(|e| {
        let offset = e.valid_up_to();
        let before = &body[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let column = offset
            - before
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1)
            + 1;
        positioned(
            py,
            format!("invalid JSON at line {line}, column {column} (byte {offset}): not UTF-8"),
            line,
            column,
            offset,
        )
    })
}

fn format_of(format: &str) -> PyResult<RequestFormat> {
    format.parse().map_err(UnknownFormatError::new_err)
}

/// Defaults, then `config_toml`, then the environment: the layers every host reads.
fn config_of(config_toml: Option<&str>) -> PyResult<Config> {
    Config::load(config_toml, |name| std::env::var(name).ok())
        .map_err(|e| ConfigValueError::new_err(e.to_string()))
}

/// Projects `body` without the GIL (the text is owned, so other threads run meanwhile) and
/// makes the answer from the body and its projection with `answer`.
fn project_then(
    py: Python<'_>,
    body: String,
    format: &str,
    config_toml: Option<&str>,
    verdicts: bool,
    answer: fn(&str, Projection) -> String,
) -> PyResult<String> {
    let format = format_of(format)?;
    let config = config_of(config_toml)?;
    py.allow_threads(move || {
        contain(|| {
            let options = Options {
                verdicts,
                ..Options::default()
            };
            staleguard::project(&body, format, &config, options).map(|p| answer(&body, p))
        })
    })?
    .map_err(|e| body_error(py, e))
}

/// What `work` answers; a panic in it (a bug) is an `InternalError`.
fn contain<T>(work: impl FnOnce() -> T) -> PyResult<T> {
    staleguard_cli::panics::contain(work).map_err(|p| InternalError::new_err(p.to_string()))
}

/// The projection of a JSON request body given as `str`.
#[pyfunction]
#[pyo3(signature = (body, format="auto", config_toml=None))]
fn project_str(
    py: Python<'_>,
    body: String,
    format: &str,
    config_toml: Option<&str>,
) -> PyResult<String> {
    project_then(py, body, format, config_toml, false, |_, p| {
        p.body.into_string()
    })
}

/// The projection of a JSON request body given as UTF-8 `bytes`.
#[pyfunction]
#[pyo3(signature = (body, format="auto", config_toml=None))]
fn project_bytes<'py>(
    py: Python<'py>,
    body: &[u8],
    format: &str,
    config_toml: Option<&str>,
) -> PyResult<Bound<'py, PyBytes>> {
    let text = utf8(py, body)?.to_owned();
    let projected = project_then(py, text, format, config_toml, false, |_, p| {
        p.body.into_string()
    })?;
    Ok(PyBytes::new_bound(py, projected.as_bytes()))
}

/// What `staleguard inspect --json` prints about `body`, as JSON text.
#[pyfunction]
#[pyo3(signature = (body, format="auto", config_toml=None))]
fn inspect_json(
    py: Python<'_>,
    body: String,
    format: &str,
    config_toml: Option<&str>,
) -> PyResult<String> {
    project_then(py, body, format, config_toml, true, |body, p| {
        inspect::Report::new(body, &p).to_json()
    })
}

/// The guard's answer about one proposed browser call.
#[pyclass(frozen, get_all, module = "staleguard")]
struct Verdict {
    /// True when the call may go to the browser.
    allowed: bool,
    /// `allow`, or why it is refused: `stale_ref`, `unknown_ref`, `reused_ref`,
    /// `needs_snapshot`, `repeated_submission`.
    kind: &'static str,
    /// The refusal text for the model, or the note on an allowed call (`None` without one).
    reason: Option<String>,
}

#[pymethods]
impl Verdict {
    fn __repr__(&self) -> String {
        let reason = match &self.reason {
            Some(reason) => format!("{reason:?}"),
            None => "None".to_string(),
        };
        let allowed = if self.allowed { "True" } else { "False" };
        format!(
            "Verdict(allowed={allowed}, kind={:?}, reason={reason})",
            self.kind
        )
    }

    fn __bool__(&self) -> bool {
        self.allowed
    }
}

/// Asks the guard about `call` (JSON text) proposed after the request `body`.
#[pyfunction]
#[pyo3(signature = (body, call, config_toml=None))]
fn check_call(
    py: Python<'_>,
    body: String,
    call: &str,
    config_toml: Option<&str>,
) -> PyResult<Verdict> {
    let config = config_of(config_toml)?;
    let call = call.to_owned();
    let verdict = py
        .allow_threads(move || {
            contain(|| {
                let engine = staleguard::Engine::new(config);
                engine.check_proposed(&body, RequestFormat::Auto, &call)
            })
        })?
        .map_err(|e| body_error(py, e))?;
    Ok(match verdict {
        GuardVerdict::Allow { note } => Verdict {
            allowed: true,
            kind: "allow",
            reason: note,
        },
        GuardVerdict::Refuse { why, message } => Verdict {
            allowed: false,
            kind: why.name(),
            reason: Some(message),
        },
    })
}

/// Runs the `staleguard` command with `argv` (the program name first) and returns its exit
/// code: the console script's body. The GIL is released for the whole run, so a long one
/// (`proxy`, `mcp`) holds up no Python thread; output goes straight to the process's
/// standard output and error, as the binary's does.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<std::ffi::OsString>) -> u8 {
    py.allow_threads(move || staleguard_cli::run(argv))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StaleguardError", py.get_type_bound::<StaleguardError>())?;
    m.add("InvalidJSONError", py.get_type_bound::<InvalidJSONError>())?;
    m.add("NotARequestError", py.get_type_bound::<NotARequestError>())?;
    m.add(
        "UnknownFormatError",
        py.get_type_bound::<UnknownFormatError>(),
    )?;
    m.add("ConfigValueError", py.get_type_bound::<ConfigValueError>())?;
    m.add("InternalError", py.get_type_bound::<InternalError>())?;
    m.add_class::<Verdict>()?;
    m.add_function(wrap_pyfunction!(project_str, m)?)?;
    m.add_function(wrap_pyfunction!(project_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(inspect_json, m)?)?;
    m.add_function(wrap_pyfunction!(check_call, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    Ok(())
}
