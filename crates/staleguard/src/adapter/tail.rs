//! Reading a body from a [`ResumeAt`] on: the messages from there, the rest of the array,
//! and the top-level members after it, as the full read would read them, without looking
//! at the bytes before. Each value is read by serde_json with the types the full read
//! uses; only the punctuation between them (`,`, `]`, `:`, `}`) is checked here, as
//! serde_json checks it. Anything else, or anything the full read would reject (a second
//! `messages`, a known key given twice), gives `None`, and the caller reads in full.

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::lenient::{is_json_space, Lenient, Seen};
use super::request::{Hints, ResumeAt, WireRequest};

/// What the tail read needs of a format's envelope besides its messages.
pub(crate) struct Envelope {
    /// The top-level keys the full read knows, besides `messages`.
    pub keys: &'static [&'static str],
    /// What a known key's value (`None` for `null`) tells: hints and breakpoints.
    pub tells: fn(&str, Option<&RawValue>) -> (Hints, usize),
}

/// Reads `body` from `at` on, messages of type `M` read by `read`; `None` where the full
/// read could answer otherwise.
pub(crate) fn read<'a, M: Deserialize<'a>>(
    body: &'a str,
    at: &ResumeAt,
    envelope: &Envelope,
    mut read: impl FnMut(&mut WireRequest<'a>, usize, M),
) -> Option<WireRequest<'a>> {
    if !body.is_char_boundary(at.offset) {
        return None;
    }
    let mut request = WireRequest::resumed(body, at);
    let mut cursor = Cursor {
        body,
        pos: at.offset,
    };
    let mut index = at.message;
    loop {
        cursor.skip_whitespace();
        let start = cursor.pos;
        let Lenient(message) = cursor.value::<Lenient<M>>()?;
        request.read_message(Some(start), index, message, &mut read);
        index += 1;
        match cursor.punct()? {
            b',' => continue,
            b']' => break,
            _ => return None,
        }
    }
    for key in &at.keys {
        request.add_key(key.clone());
    }
    read_members(&mut cursor, &mut request, envelope)?;
    cursor.skip_whitespace();
    (cursor.pos == body.len()).then_some(request)
}

/// Reads the members after the array up to the object's closing brace.
fn read_members<'a>(
    cursor: &mut Cursor<'a>,
    request: &mut WireRequest<'a>,
    envelope: &Envelope,
) -> Option<()> {
    loop {
        match cursor.punct()? {
            b'}' => return Some(()),
            b',' => read_member(cursor, request, envelope)?,
            _ => return None,
        }
    }
}

/// Reads one `"key": value` member.
fn read_member<'a>(
    cursor: &mut Cursor<'a>,
    request: &mut WireRequest<'a>,
    envelope: &Envelope,
) -> Option<()> {
    cursor.skip_whitespace();
    // The full read matches keys decoded, so `"m\u0065ssages"` is `messages` too.
    let key: String = cursor.value()?;
    if cursor.punct()? != b':' {
        return None;
    }
    if key == "messages" {
        return None; // a second `messages`: the full read fails
    }
    match envelope.keys.iter().find(|k| **k == key) {
        Some(name) => read_known(cursor, request, envelope, name),
        None => cursor.value::<IgnoredAny>().map(drop),
    }
}

/// Reads the value of the known key `name`, which the full read refuses a second time.
fn read_known<'a>(
    cursor: &mut Cursor<'a>,
    request: &mut WireRequest<'a>,
    envelope: &Envelope,
    name: &'static str,
) -> Option<()> {
    if request.has_key(name) {
        return None;
    }
    let seen: Seen<'a> = cursor.value()?;
    request.note_key(name, seen, envelope.tells);
    // A key the request did not note could not be placed: it would be read twice.
    request.has_key(name).then_some(())
}

/// A position in the body, moved over values and the punctuation between them.
struct Cursor<'a> {
    body: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// Skips JSON whitespace (the four bytes serde_json skips).
    fn skip_whitespace(&mut self) {
        let bytes = self.body.as_bytes();
        while bytes.get(self.pos).is_some_and(|b| is_json_space(*b)) {
            self.pos += 1;
        }
    }

    /// The next byte that is not whitespace, consumed.
    fn punct(&mut self) -> Option<u8> {
        self.skip_whitespace();
        let byte = *self.body.as_bytes().get(self.pos)?;
        self.pos += 1;
        Some(byte)
    }

    /// The JSON value at the cursor (after whitespace), read as `T`.
    fn value<T: Deserialize<'a>>(&mut self) -> Option<T> {
        let rest = self.body.get(self.pos..)?;
        // A stream reads one value and says where it ended; a number must end at
        // punctuation or whitespace, as in an array or object.
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = stream.next()?.ok()?;
        self.pos += stream.byte_offset();
        Some(value)
    }
}
