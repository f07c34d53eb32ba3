//! The projected request body.
//!
//! A request that resumed from a checkpoint (see [`Memo`](crate::Memo)) is the checkpoint's
//! projected bytes, kept in shared parts, then the bytes written after them. A host that
//! sends the body (the proxy) takes those parts as they are, [`Body::into_chunks`], instead
//! of copying the session's history into one string on every turn; everything else reads it
//! as a `str`, joined on first use.

use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, OnceLock};

/// The body to send to the model: a `str` to read, chunks to send.
#[derive(Clone, Default)]
pub struct Body {
    /// Projected bytes shared with the checkpoint the request resumed from.
    shared: Vec<Arc<str>>,
    /// What follows them: the whole body when nothing is shared.
    tail: String,
    joined: OnceLock<String>,
}

/// One piece of a [`Body`], in order: shared with a checkpoint, or the body's own.
#[derive(Debug, Clone)]
pub enum BodyChunk {
    /// Bytes a checkpoint in the memo holds too.
    Shared(Arc<str>),
    /// Bytes this body alone holds.
    Owned(String),
}

impl AsRef<[u8]> for BodyChunk {
    fn as_ref(&self) -> &[u8] {
        match self {
            BodyChunk::Shared(text) => text.as_bytes(),
            BodyChunk::Owned(text) => text.as_bytes(),
        }
    }
}

impl Body {
    /// `shared` parts, then `tail`.
    pub(crate) fn resumed(shared: Vec<Arc<str>>, tail: String) -> Body {
        Body {
            shared,
            tail,
            joined: OnceLock::new(),
        }
    }

    /// Its length in bytes, without joining it.
    pub fn len(&self) -> usize {
        self.shared.iter().map(|p| p.len()).sum::<usize>() + self.tail.len()
    }

    /// True when it holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The body as one string; a resumed body is joined on the first call.
    pub fn as_str(&self) -> &str {
        if self.shared.is_empty() {
            return &self.tail;
        }
        self.joined.get_or_init(|| self.chunks().collect())
    }

    /// Its pieces in order, without joining them.
    pub fn chunks(&self) -> impl Iterator<Item = &str> {
        self.shared.iter().map(|p| &**p).chain([&*self.tail])
    }

    /// Its pieces in order, owned, for a host that sends them one after another; none
    /// is empty.
    pub fn into_chunks(self) -> Vec<BodyChunk> {
        let tail = (!self.tail.is_empty()).then_some(BodyChunk::Owned(self.tail));
        let shared = self.shared.into_iter().filter(|p| !p.is_empty());
        shared.map(BodyChunk::Shared).chain(tail).collect()
    }

    /// The body as one `String`.
    pub fn into_string(mut self) -> String {
        match (self.shared.is_empty(), self.joined.take()) {
            (true, _) => self.tail,
            (false, Some(joined)) => joined,
            (false, None) => self.chunks().collect(),
        }
    }
}

impl From<String> for Body {
    fn from(tail: String) -> Body {
        Body::resumed(Vec::new(), tail)
    }
}

impl From<Body> for String {
    fn from(body: Body) -> String {
        body.into_string()
    }
}

impl Deref for Body {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Body {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Body {
    fn as_ref(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.chunks().try_for_each(|c| f.write_str(c))
    }
}

impl PartialEq for Body {
    fn eq(&self, other: &Body) -> bool {
        self.len() == other.len() && self.as_str() == other.as_str()
    }
}

impl Eq for Body {}

impl PartialEq<str> for Body {
    fn eq(&self, other: &str) -> bool {
        self.len() == other.len() && self.as_str() == other
    }
}

impl PartialEq<&str> for Body {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl PartialEq<String> for Body {
    fn eq(&self, other: &String) -> bool {
        *self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resumed() -> Body {
        let shared = vec![Arc::from("{\"messages\":["), Arc::from(""), Arc::from("1,")];
        Body::resumed(shared, "2]}".to_string())
    }

    #[test]
    fn a_resumed_body_reads_as_its_parts_joined() {
        let body = resumed();
        assert_eq!(body.len(), 18);
        assert_eq!(body.as_str(), "{\"messages\":[1,2]}");
        assert_eq!(body.to_string(), "{\"messages\":[1,2]}");
        assert_eq!(body, "{\"messages\":[1,2]}");
        assert_eq!(body, Body::from("{\"messages\":[1,2]}".to_string()));
        assert_ne!(body, Body::from("{\"messages\":[1,3]}".to_string()));
        assert_eq!(body.clone().into_string(), "{\"messages\":[1,2]}");
    }

    #[test]
    fn chunks_are_the_parts_in_order_without_empty_ones() {
        let chunks = resumed().into_chunks();
        let texts: Vec<&[u8]> = chunks.iter().map(|c| c.as_ref()).collect();
        assert_eq!(texts, [&b"{\"messages\":["[..], b"1,", b"2]}"]);
        assert!(matches!(chunks.last(), Some(BodyChunk::Owned(_))));
        assert!(Body::from(String::new()).into_chunks().is_empty());
    }

    #[test]
    fn a_whole_body_is_its_string() {
        let body = Body::from("{}".to_string());
        assert_eq!(body.as_str(), "{}");
        assert_eq!(body.chunks().collect::<Vec<_>>(), ["{}"]);
        assert_eq!(String::from(body), "{}");
    }
}
