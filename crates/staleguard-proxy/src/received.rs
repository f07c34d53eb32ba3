//! A request body read whole, and for a model request checked as UTF-8 frame by frame
//! while it arrives.
//!
//! A 1 MB body comes in frames of a few dozen kilobytes. Collecting them and then checking
//! the whole as UTF-8 reads the megabyte twice more after it arrived, both on the request's
//! critical path. Checking each frame as it is copied into one `String` reads it while it
//! is still in the cache, and while the client is still sending the rest; the projection
//! then takes the `String` as it is.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;

/// A request body, read whole.
pub(crate) enum Received {
    /// UTF-8 throughout.
    Text(Arc<String>),
    /// Not checked (not a model request, or content-encoded), or not UTF-8.
    Bytes(Bytes),
}

/// The body was longer than the limit, or the client stopped sending it.
pub(crate) struct Unreadable;

impl Received {
    /// Reads all of `body`, at most `limit` bytes. With `text`, checks it as UTF-8 as it
    /// arrives, into a buffer of `expected` bytes (the request's `Content-Length`, a hint).
    pub(crate) async fn read(
        body: Body,
        limit: usize,
        text: bool,
        expected: Option<usize>,
    ) -> Result<Received, Unreadable> {
        if !text {
            let bytes = axum::body::to_bytes(body, limit).await;
            return bytes.map(Received::Bytes).map_err(|_| Unreadable);
        }
        let mut stream = body.into_data_stream();
        let mut reader = Utf8Reader::with_capacity(expected.unwrap_or(0).min(limit));
        while let Some(frame) = stream.next().await {
            let frame = frame.map_err(|_| Unreadable)?;
            if reader.len() + frame.len() > limit {
                return Err(Unreadable);
            }
            reader.push(&frame);
        }
        Ok(reader.finish())
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Received::Text(text) => text.len(),
            Received::Bytes(bytes) => bytes.len(),
        }
    }

    /// The bytes as they came, without a copy.
    pub(crate) fn into_bytes(self) -> Bytes {
        match self {
            Received::Text(text) => Bytes::from_owner(SharedText(text)),
            Received::Bytes(bytes) => bytes,
        }
    }
}

/// A shared `String` seen as bytes, so a body read as text can go upstream as it came.
struct SharedText(Arc<String>);

impl AsRef<[u8]> for SharedText {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Frames checked and copied into one `String` while they are UTF-8, into plain bytes
/// once one is not.
enum Utf8Reader {
    Text {
        text: String,
        /// The start of a character that the last frame cut short (at most 3 bytes).
        pending: Vec<u8>,
    },
    Bytes(Vec<u8>),
}

impl Utf8Reader {
    fn with_capacity(capacity: usize) -> Utf8Reader {
        Utf8Reader::Text {
            text: String::with_capacity(capacity),
            pending: Vec::new(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Utf8Reader::Text { text, pending } => text.len() + pending.len(),
            Utf8Reader::Bytes(bytes) => bytes.len(),
        }
    }

    fn push(&mut self, frame: &[u8]) {
        let pushed = match self {
            Utf8Reader::Text { text, pending } => push_text(text, pending, frame),
            Utf8Reader::Bytes(bytes) => {
                bytes.extend_from_slice(frame);
                Ok(())
            }
        };
        if let Err(at) = pushed {
            self.give_up(&frame[at..]);
        }
    }

    /// Not UTF-8: keeps everything so far and `rest` as bytes.
    fn give_up(&mut self, rest: &[u8]) {
        if let Utf8Reader::Text { text, pending } = self {
            let mut bytes = std::mem::take(text).into_bytes();
            bytes.extend_from_slice(pending);
            bytes.extend_from_slice(rest);
            *self = Utf8Reader::Bytes(bytes);
        }
    }

    fn finish(self) -> Received {
        match self {
            Utf8Reader::Text { text, pending } if pending.is_empty() => {
                Received::Text(Arc::new(text))
            }
            // A character cut short at the end is not UTF-8.
            Utf8Reader::Text { text, pending } => {
                let mut bytes = text.into_bytes();
                bytes.extend_from_slice(&pending);
                Received::Bytes(bytes.into())
            }
            Utf8Reader::Bytes(bytes) => Received::Bytes(bytes.into()),
        }
    }
}

/// Appends `frame` to `text` while it is UTF-8, keeping a character it cuts short in
/// `pending`. Fails with where the bytes of `frame` that were not kept begin.
fn push_text(text: &mut String, pending: &mut Vec<u8>, frame: &[u8]) -> Result<(), usize> {
    let mut at = 0;
    if let Some(&lead) = pending.first() {
        // Complete the character the last frame began, then go on after it.
        let missing = char_len(lead)
            .saturating_sub(pending.len())
            .min(frame.len());
        pending.extend_from_slice(&frame[..missing]);
        at = missing;
        if pending.len() < char_len(lead) {
            return Ok(());
        }
        text.push_str(std::str::from_utf8(pending).map_err(|_| at)?);
        pending.clear();
    }
    let rest = &frame[at..];
    let whole = complete(rest);
    text.push_str(std::str::from_utf8(&rest[..whole]).map_err(|_| at)?);
    pending.extend_from_slice(&rest[whole..]);
    Ok(())
}

/// The length of a character that starts with `lead`; 1 for a byte that starts none (which
/// the check then rejects).
fn char_len(lead: u8) -> usize {
    match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// How much of `data` ends on a character boundary: all of it, unless its last character is
/// cut short (then up to its start).
fn complete(data: &[u8]) -> usize {
    for back in 1..=data.len().min(3) {
        let at = data.len() - back;
        // The last byte that is not a continuation byte starts the last character.
        if data[at] & 0xC0 != 0x80 {
            return if char_len(data[at]) > back {
                at
            } else {
                data.len()
            };
        }
    }
    data.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read(frames: &[&[u8]]) -> Received {
        let mut reader = Utf8Reader::with_capacity(0);
        for f in frames {
            reader.push(f);
        }
        reader.finish()
    }

    fn split(data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
        at.sort_unstable();
        let mut frames = Vec::new();
        let mut from = 0;
        for to in at.into_iter().chain([data.len()]) {
            frames.push(data[from..to].to_vec());
            from = to;
        }
        frames
    }

    #[test]
    fn a_character_cut_between_frames_is_joined() {
        let text = "price: 1 140 € — ✓ 𝄞";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let got = read(&[&bytes[..cut], &bytes[cut..]]);
            let Received::Text(got) = got else {
                panic!("cut at {cut} was not read as text");
            };
            assert_eq!(got.as_str(), text, "cut at {cut}");
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_as_they_came() {
        let cases: [&[&[u8]]; 4] = [
            &[b"{\"a\":\"", b"\xff\"}"],
            &[b"ok \xE2\x82", b"x"],
            &[b"ends cut \xF0\x9D"],
            &[b"\xC0\xAF overlong"],
        ];
        for frames in cases {
            let Received::Bytes(got) = read(frames) else {
                panic!("{frames:?} was read as text");
            };
            assert_eq!(got.to_vec(), frames.concat());
        }
    }

    proptest! {
        #[test]
        fn frames_are_read_as_text_exactly_when_they_are_utf8(
            data in prop_oneof![
                any::<String>().prop_map(String::into_bytes),
                proptest::collection::vec(any::<u8>(), 0..64),
                any::<String>().prop_map(|s| {
                    let mut b = s.into_bytes();
                    b.insert(b.len() / 2, 0x80);
                    b
                }),
            ],
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let frames = split(&data, &cuts);
            let frames: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let got = read(&frames);
            prop_assert_eq!(got.len(), data.len());
            match got {
                Received::Text(text) => {
                    prop_assert_eq!(std::str::from_utf8(&data).ok(), Some(text.as_str()))
                }
                Received::Bytes(bytes) => {
                    prop_assert!(std::str::from_utf8(&data).is_err());
                    prop_assert_eq!(bytes.to_vec(), data);
                }
            }
        }
    }
}
