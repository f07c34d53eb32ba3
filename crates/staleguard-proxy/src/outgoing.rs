//! A request body on its way upstream: the bytes received, or a projection's chunks.
//!
//! A request that resumed from a checkpoint is mostly the checkpoint's projected bytes,
//! which the memo keeps in shared parts. They go upstream as they are, one chunk after
//! another under a `Content-Length`, instead of being copied into one buffer first.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};

/// The chunks of a body to send.
pub(crate) struct Outgoing {
    chunks: Vec<Bytes>,
}

impl Outgoing {
    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(Bytes::len).sum()
    }

    /// The body for the upstream request: of known length, so it is sent with a
    /// `Content-Length`, never chunked.
    pub(crate) fn into_body(mut self) -> reqwest::Body {
        if self.chunks.len() <= 1 {
            return reqwest::Body::from(self.chunks.pop().unwrap_or_default());
        }
        reqwest::Body::wrap(Chunks {
            left: self.len() as u64,
            chunks: self.chunks.into(),
        })
    }
}

impl From<Bytes> for Outgoing {
    fn from(bytes: Bytes) -> Outgoing {
        Outgoing {
            chunks: vec![bytes],
        }
    }
}

impl From<crate::frames::Frames> for Outgoing {
    fn from(frames: crate::frames::Frames) -> Outgoing {
        Outgoing {
            chunks: frames.into_chunks(),
        }
    }
}

impl From<staleguard::Body> for Outgoing {
    fn from(body: staleguard::Body) -> Outgoing {
        let chunks = body.into_chunks().into_iter().map(Bytes::from_owner);
        Outgoing {
            chunks: chunks.collect(),
        }
    }
}

/// Chunks sent one after another, with their exact length as the size hint.
struct Chunks {
    chunks: VecDeque<Bytes>,
    left: u64,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = self.chunks.pop_front();
        if let Some(chunk) = &next {
            self.left -= chunk.len() as u64;
        }
        Poll::Ready(next.map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn chunks_go_in_order_with_their_exact_length() {
        let chunks = vec![Bytes::from("{\"a\":"), Bytes::from("1"), Bytes::from("}")];
        let body = Chunks {
            left: 7,
            chunks: chunks.into(),
        };
        assert_eq!(http_body::Body::size_hint(&body).exact(), Some(7));
        let collected = body.collect().await.map(|c| c.to_bytes());
        assert_eq!(collected.ok(), Some(Bytes::from("{\"a\":1}")));
    }

    #[test]
    fn a_body_keeps_its_length() {
        let outgoing = Outgoing::from(staleguard::Body::from("{}".to_string()));
        assert_eq!(outgoing.len(), 2);
        assert_eq!(outgoing.into_body().as_bytes(), Some(&b"{}"[..]));
    }
}
