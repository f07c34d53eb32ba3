//! The request body a command reads: a file, or standard input.

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
            String::from_utf8(bytes).map(Body::Read).map_err(|e| {
                Failure::Message(format!(
                    "standard input is not UTF-8 (byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })
        }
    }
}

fn read_path(path: &Path) -> Result<Body, Failure> {
    let cannot =
        |e: std::io::Error| Failure::Message(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() || meta.len() < MAP_FROM_BYTES {
        return crate::read_file(path).map(Body::Read);
    }
    // SAFETY: the map is read-only and checked as UTF-8 before it is used as text; see
    // `Deref` for a file changed while mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(cannot)?;
    match std::str::from_utf8(&map) {
        Ok(_) => Ok(Body::Mapped(map)),
        Err(e) => Err(Failure::Message(format!(
            "{} is not UTF-8 (byte {})",
            path.display(),
            e.valid_up_to()
        ))),
    }
}
