//! JSON strings as the readers meet them: decoded fast, raw text, and the errors of a
//! body that is not JSON or not of its format's shape.

use crate::error::Error;

/// A syntax error is a JSON error with a position; a wrong shape is a shape error.
pub(crate) fn json_error(err: &serde_json::Error, body: &str, format: &'static str) -> Error {
    if err.is_data() {
        Error::Shape {
            format,
            reason: err.to_string(),
        }
    } else {
        Error::json(err, body)
    }
}

/// A JSON string value, decoded.
pub(crate) fn string_of(raw: &serde_json::value::RawValue) -> Option<std::borrow::Cow<'_, str>> {
    match raw.get().as_bytes().first() {
        Some(b'"') => decode_valid(raw.get()),
        _ => None,
    }
}

/// Decodes a JSON string literal, quotes included; `None` when `json` is no string. The
/// tests' entry to [`decode_valid`], which the readers call on validated literals.
///
/// Tool results are MBs of text with an escape on every line, decoded on every request:
/// this jumps from one backslash to the next ([`find_backslash`]), where serde_json reads
/// byte by byte. Anything unusual (a `\u` escape that is not a whole character, a raw control
/// character) goes to serde_json, so both always agree.
#[cfg(test)]
pub(crate) fn decode_string(json: &str) -> Option<std::borrow::Cow<'_, str>> {
    // serde_json validates the literal as it validates a body; lone surrogates pass.
    let raw: &serde_json::value::RawValue = serde_json::from_str(json).ok()?;
    string_of(raw)
}

/// `decode_string` of a literal that serde_json has already validated (a `RawValue`):
/// no raw control characters and no bare quotes inside, every escape well formed.
///
/// A `\u` escape of a lone UTF-16 surrogate (`\ud800` alone, or a low one first) decodes to
/// U+FFFD, as `String::from_utf16_lossy` and a browser's `TextEncoder` read it. serde_json
/// refuses such a string, and JSON allows it: a page puts one in its text with one line of
/// JavaScript, and Playwright MCP passes it on as that escape. Refused, the whole result
/// would be unreadable, so the page would be no observation: never collapsed while old, and
/// not the live page while newest (the guard would check calls against the page before it).
///
/// Copies eight bytes at a time between escapes, into a buffer as long as the literal
/// (decoding never lengthens it): escapes come every 17 bytes or so, and a copy per stretch
/// between them cost more than the stretch. The result is checked as UTF-8 once, at the end.
fn decode_valid(json: &str) -> Option<std::borrow::Cow<'_, str>> {
    use std::borrow::Cow;
    let serde = || serde_json::from_str::<Cow<'_, str>>(json).ok();
    let inner = json.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    let Some(first) = find_backslash(bytes, 0) else {
        return Some(Cow::Borrowed(inner));
    };
    let mut out = vec![0u8; bytes.len()];
    out.get_mut(..first)?.copy_from_slice(bytes.get(..first)?);
    // `r` reads `bytes` and `w` writes `out`; `w <= r` throughout.
    let (mut r, mut w) = (first, first);
    loop {
        let Some((c, used)) = escape_at(bytes, r) else {
            return serde();
        };
        w += c.encode_utf8(out.get_mut(w..)?).len();
        r += used;
        if !copy_to_backslash(bytes, &mut out, &mut r, &mut w)? {
            out.truncate(w);
            return String::from_utf8(out).ok().map(Cow::Owned).or_else(serde);
        }
    }
}

/// The escape at `bytes[at]` (a backslash): its character and the bytes it took; `None`
/// for what serde_json should decide (an unknown escape, bad hex).
fn escape_at(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let c = match bytes.get(at + 1)? {
        b'n' => '\n',
        b't' => '\t',
        b'r' => '\r',
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'u' => return unicode_escape(bytes.get(at..)?),
        _ => return None,
    };
    Some((c, 2))
}

/// Copies `bytes[r..]` to `out[w..]` up to the next backslash, advancing both: true at a
/// backslash, false at the end. Whole words are copied; bytes past the
/// backslash are written over by what follows.
fn copy_to_backslash(bytes: &[u8], out: &mut [u8], r: &mut usize, w: &mut usize) -> Option<bool> {
    while let Some(word) = bytes.get(*r..*r + 8) {
        out.get_mut(*w..*w + 8)?.copy_from_slice(word);
        if let Some(p) = backslash_in(word) {
            *r += p;
            *w += p;
            return Some(true);
        }
        *r += 8;
        *w += 8;
    }
    let rest = bytes.get(*r..)?;
    let p = rest.iter().position(|&b| b == b'\\');
    let n = p.unwrap_or(rest.len());
    out.get_mut(*w..*w + n)?.copy_from_slice(rest.get(..n)?);
    *r += n;
    *w += n;
    Some(p.is_some())
}

/// The place of the first backslash in an eight-byte word.
fn backslash_in(word: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let mut w = [0u8; 8];
    w.copy_from_slice(word.get(..8)?);
    // A zero byte of `x` is a backslash of the word; the lowest flag is always exact.
    let x = u64::from_le_bytes(w) ^ (ONES * u64::from(b'\\'));
    let found = x.wrapping_sub(ONES) & !x & HIGHS;
    (found != 0).then(|| (found.trailing_zeros() / 8) as usize)
}

/// The first backslash of `b` at or after `from`, read eight bytes at a time. Escapes in
/// tool results come every 17 bytes or so (a line break, a quote), too close together for
/// `memchr`'s vector search to pay for its set-up: this decodes a recorded request's results
/// a tenth faster.
fn find_backslash(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while let Some(word) = b.get(i..i + 8) {
        if let Some(p) = backslash_in(word) {
            return Some(i + p);
        }
        i += 8;
    }
    b.get(i..)?.iter().position(|&c| c == b'\\').map(|p| i + p)
}

/// `\uXXXX`, or a surrogate pair `\uD83D\uDE00`, at the start of `b`: the character and
/// the bytes it took; a lone surrogate is U+FFFD and takes its six bytes ([`decode_valid`]).
/// `None` for bad hex (serde_json decides that).
fn unicode_escape(b: &[u8]) -> Option<(char, usize)> {
    let hex = |at: usize| -> Option<u32> {
        let digits = std::str::from_utf8(b.get(at..at + 4)?).ok()?;
        if !digits.bytes().all(|d| d.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    };
    let high = hex(2)?;
    if !(0xD800..0xE000).contains(&high) {
        return Some((char::from_u32(high)?, 6));
    }
    let low = match b.get(6..8) {
        Some(b"\\u") if high < 0xDC00 => hex(8).filter(|low| (0xDC00..0xE000).contains(low)),
        _ => None,
    };
    let Some(low) = low else {
        return Some((char::REPLACEMENT_CHARACTER, 6));
    };
    let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    Some((char::from_u32(c)?, 12))
}

/// An optional JSON string field, decoded as [`string_of`] decodes it (a lone surrogate as
/// U+FFFD, where serde_json would refuse the whole object), for
/// `#[serde(default, borrow, deserialize_with = "lossy_text")]` on the fields that carry
/// page or conversation text. Any other value than a string or `null` is an error, as it is
/// for a `Cow<str>` field.
pub(crate) fn lossy_text<'de: 'a, 'a, D>(
    deserializer: D,
) -> Result<Option<std::borrow::Cow<'a, str>>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let raw: Option<&'de serde_json::value::RawValue> =
        serde::Deserialize::deserialize(deserializer)?;
    match raw {
        None => Ok(None),
        Some(raw) => string_of(raw)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("expected a string")),
    }
}

/// Arguments as JSON text: decoded when a string, the raw JSON otherwise.
pub(crate) fn raw_text(raw: Option<&serde_json::value::RawValue>) -> std::borrow::Cow<'_, str> {
    match raw {
        None => std::borrow::Cow::Borrowed(""),
        Some(r) => string_of(r).unwrap_or(std::borrow::Cow::Borrowed(r.get())),
    }
}

/// Content arrays with Anthropic block types mark an Anthropic body.
pub(crate) fn looks_anthropic(content: &serde_json::value::RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct BlockType {
        #[serde(rename = "type")]
        kind: Option<String>,
    }
    const TYPES: &[&str] = &["tool_use", "tool_result", "thinking", "redacted_thinking"];
    let json = content.get();
    json.starts_with('[')
        && TYPES.iter().any(|t| json.contains(&format!("\"{t}\"")))
        && serde_json::from_str::<Vec<BlockType>>(json).is_ok_and(|blocks| {
            blocks
                .iter()
                .any(|b| b.kind.as_deref().is_some_and(|k| TYPES.contains(&k)))
        })
}

#[cfg(test)]
mod tests {
    use super::{decode_string, find_backslash, string_of};

    proptest::proptest! {
        /// The word-at-a-time search finds the first backslash from any start, as a byte
        /// scan does: backslashes at every place in a word, bytes that differ from one by a
        /// bit, and starts past the end.
        #[test]
        fn backslashes_are_found_as_a_scan_finds_them(
            bytes in proptest::collection::vec(proptest::prop_oneof![
                proptest::strategy::Just(b'\\'),
                proptest::strategy::Just(b'\\' ^ 1),
                proptest::strategy::Just(b'\\' | 0x80),
                proptest::num::u8::ANY,
            ], 0..40),
            from in 0usize..45,
        ) {
            let scan = bytes.iter().enumerate().skip(from).find(|(_, &b)| b == b'\\').map(|(i, _)| i);
            proptest::prop_assert_eq!(find_backslash(&bytes, from), scan);
        }

        /// The fast decoder reads every JSON string as serde_json does.
        #[test]
        fn strings_decode_as_serde_does(s in "(\\PC|[\"\\\\\n\t\u{1}\u{8}\u{c}/]|\u{1F600})*") {
            let json = serde_json::to_string(&s).unwrap();
            let decoded = decode_string(&json);
            proptest::prop_assert_eq!(decoded.as_deref(), Some(s.as_str()));
        }

        /// Escapes written by other encoders (`\\u` for anything, `\\/`), broken ones too,
        /// between stretches shorter and longer than the decoder's eight-byte words. A lone
        /// surrogate reads as U+FFFD, where serde_json refuses the string.
        #[test]
        fn escapes_decode_as_serde_does(parts in proptest::collection::vec(proptest::prop_oneof![
            "[a-z é😀]{0,20}",
            proptest::prop_oneof![
                proptest::strategy::Just("\\u00e9".to_string()),
                proptest::strategy::Just("\\ud83d\\ude00".to_string()),
                proptest::strategy::Just("\\ud83d".to_string()),
                proptest::strategy::Just("\\ude00x".to_string()),
                proptest::strategy::Just("\\/".to_string()),
                proptest::strategy::Just("\\\"\\n".to_string()),
                proptest::strategy::Just("\\x".to_string()),
                proptest::strategy::Just("\\u12".to_string()),
                proptest::strategy::Just("\\".to_string()),
            ],
        ], 0..12)) {
            let json = format!("\"{}\"", parts.concat());
            let serde: Option<std::borrow::Cow<'_, str>> = serde_json::from_str(&json).ok();
            let expected = serde.map(|s| s.into_owned()).or_else(|| utf16_lossy(&json));
            proptest::prop_assert_eq!(decode_string(&json).map(|s| s.into_owned()), expected);
        }
    }

    /// A JSON string literal read as UTF-16 code units, then as `String::from_utf16_lossy`
    /// reads them: what a lone surrogate escape means. `None` for no literal (a broken
    /// escape, a bare quote or control character inside).
    fn utf16_lossy(json: &str) -> Option<String> {
        let inner = json.strip_prefix('"')?.strip_suffix('"')?;
        let mut units: Vec<u16> = Vec::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '"' || c < ' ' {
                return None;
            }
            if c != '\\' {
                units.extend(c.encode_utf16(&mut [0; 2]).iter());
                continue;
            }
            let unit = match chars.next()? {
                'n' => 0x0a,
                't' => 0x09,
                'r' => 0x0d,
                'b' => 0x08,
                'f' => 0x0c,
                c @ ('"' | '\\' | '/') => c as u16,
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    (hex.len() == 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
                        .then(|| u16::from_str_radix(&hex, 16).ok())??
                }
                _ => return None,
            };
            units.push(unit);
        }
        Some(String::from_utf16_lossy(&units))
    }

    /// A page's lone surrogates (`\ud800`, a low one first, a high one before a non-low
    /// escape) read as U+FFFD; a pair still reads as its character.
    #[test]
    fn lone_surrogates_read_as_replacement_characters() {
        let cases = [
            ("\"high \\ud800 surrogate\"", "high \u{fffd} surrogate"),
            ("\"low \\udc00\"", "low \u{fffd}"),
            ("\"\\udc00\\ud83d reversed\"", "\u{fffd}\u{fffd} reversed"),
            ("\"\\ud83d\\u0041\"", "\u{fffd}A"),
            ("\"end \\ud83d\"", "end \u{fffd}"),
            ("\"pair \\ud83d\\ude00\"", "pair \u{1f600}"),
        ];
        for (json, want) in cases {
            assert_eq!(decode_string(json).as_deref(), Some(want), "{json}");
            let raw: &serde_json::value::RawValue = serde_json::from_str(json).expect("raw");
            assert_eq!(string_of(raw).as_deref(), Some(want), "{json}");
        }
    }

    #[test]
    fn non_strings_are_none() {
        for json in ["1", "null", "{}", "[\"a\"]", ""] {
            assert_eq!(decode_string(json), None, "{json}");
        }
    }
}
