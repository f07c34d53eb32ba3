//! The request body a command reads: a file, or standard input.
// The one unsafe floor of the workspace: a mapped file, checked as UTF-8 once when mapped.
#![allow(unsafe_code)]

use std::io::Read;
use std::path::Path;

use crate::Failure;

/// Files at least this large are mapped, not copied: the copy of a 10 MB request was a
/// tenth of `staleguard project`'s time. Smaller ones are read, which costs less than a map.
const MAP_FROM_BYTES: u64 = 1 << 20;

/// A request body, checked as UTF-8.
pub(crate) enum Body {
    Read(String),
    /// A file mapped read-only, checked as UTF-8 when mapped.
    Mapped(memmap2::Mmap),
}

impl std::ops::Deref for Body {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Body::Read(text) => text,
            // SAFETY: the bytes were checked as UTF-8 when mapped, and the map is read-only.
            // As with every mapped file, a writer that changes the file while it is mapped
            // changes these bytes: the command reads a request it was given to read, not
            // one still being written.
            Body::Mapped(map) => unsafe { std::str::from_utf8_unchecked(map) },
        }
    }
}

/// The body in `path`, or standard input for `None` or `-`.
pub(crate) fn read_body(path: Option<&Path>) -> Result<Body, Failure> {
    match path {
        Some(p) if p != Path::new("-") => read_path(p),
        _ => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .read_to_end(&mut bytes)
                .map_err(|e| Failure::Message(format!("cannot read standard input: {e}")))?;
            text_of(bytes, "standard input").map(Body::Read)
        }
    }
}

/// The text of the file at `path` (a config, evidence items, a recording), read whole.
pub(crate) fn read_file(path: &Path) -> Result<String, Failure> {
    let bytes = std::fs::read(path).map_err(|e| cannot_read(path, e))?;
    text_of(bytes, path.display())
}

fn read_path(path: &Path) -> Result<Body, Failure> {
    let mut file = std::fs::File::open(path).map_err(|e| cannot_read(path, e))?;
    let meta = file.metadata().map_err(|e| cannot_read(path, e))?;
    if !meta.is_file() || meta.len() < MAP_FROM_BYTES {
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| cannot_read(path, e))?;
        return text_of(bytes, path.display()).map(Body::Read);
    }
    // SAFETY: the map is read-only and checked as UTF-8 before it is used as text; see
    // `Deref` for a file changed while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| cannot_read(path, e))?;
    match std::str::from_utf8(&map) {
        Ok(_) => Ok(Body::Mapped(map)),
        Err(e) => Err(not_utf8(path.display(), e)),
    }
}

fn cannot_read(path: &Path, e: std::io::Error) -> Failure {
    Failure::Message(format!("cannot read {}: {e}", path.display()))
}

/// `bytes` as text, or the error that names `what` and the first byte that is not UTF-8.
fn text_of(bytes: Vec<u8>, what: impl std::fmt::Display) -> Result<String, Failure> {
    String::from_utf8(bytes).map_err(|e| not_utf8(what, e.utf8_error()))
}

fn not_utf8(what: impl std::fmt::Display, e: std::str::Utf8Error) -> Failure {
    Failure::Message(format!("{what} is not UTF-8 (byte {})", e.valid_up_to()))
}
