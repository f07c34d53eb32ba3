//! A request body as its frames arrived.
//!
//! A 1 MB body comes in a few dozen frames. Joining them copies the megabyte into one
//! fresh buffer (about a sixth of a warm turn's time in the proxy). The next turn of a
//! session the memo holds is projected from the frames themselves, and a body that goes
//! upstream unchanged is sent as its frames; only a whole projection, or decoding, joins
//! them.

use axum::body::{Body, Bytes};
use bytes::BytesMut;
use futures_util::StreamExt;

/// The frames of a request body, in order.
pub(crate) struct Frames(Vec<Bytes>);

impl Frames {
    /// All of `body`; `None` when it is longer than `limit` bytes or the client stopped
    /// sending it.
    pub(crate) async fn read(body: Body, limit: usize) -> Option<Frames> {
        let mut stream = body.into_data_stream();
        let (mut frames, mut len) = (Vec::new(), 0);
        while let Some(frame) = stream.next().await {
            let frame = frame.ok()?;
            len += frame.len();
            if len > limit {
                return None;
            }
            if !frame.is_empty() {
                frames.push(frame);
            }
        }
        Some(Frames(frames))
    }

    /// Its length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.0.iter().map(Bytes::len).sum()
    }

    /// The frames as byte slices.
    pub(crate) fn parts(&self) -> Vec<&[u8]> {
        self.0.iter().map(|f| f.as_ref()).collect()
    }

    /// The body in one buffer: a copy, unless it came in one frame.
    pub(crate) fn join(mut self) -> Bytes {
        if self.0.len() <= 1 {
            return self.0.pop().unwrap_or_default();
        }
        let mut joined = BytesMut::with_capacity(self.len());
        for frame in &self.0 {
            joined.extend_from_slice(frame);
        }
        joined.freeze()
    }

    pub(crate) fn into_chunks(self) -> Vec<Bytes> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn frames_join_to_the_body_and_the_limit_holds() {
        let sent = [Bytes::from("{\"a\":"), Bytes::new(), Bytes::from("\"é\"}")];
        let stream = || futures_util::stream::iter(sent.clone().map(Ok::<_, std::io::Error>));
        let frames = Frames::read(Body::from_stream(stream()), 64).await;
        let frames = frames.expect("read");
        assert_eq!(frames.len(), 10);
        assert_eq!(frames.parts(), [&b"{\"a\":"[..], "\"é\"}".as_bytes()]);
        assert_eq!(frames.join(), Bytes::from("{\"a\":\"é\"}"));
        let over = Frames::read(Body::from_stream(stream()), 9).await;
        assert!(over.is_none(), "over the limit");
        let at = Frames::read(Body::from_stream(stream()), 10).await;
        assert!(at.is_some(), "at the limit");
    }
}
