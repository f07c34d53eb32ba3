//! Neutralising ref tokens in text we render ourselves (receipts, evidence), so that page
//! text carried there can never pose as an actionable ref.

use std::borrow::Cow;

/// Rewrites every ref token so that no format would read it as a ref:
/// `ref=e5` becomes `ref:e5`, `@e5` becomes `(at)e5`, and a browser-use index `[33]<`
/// becomes `(33)<`. Text without such tokens is borrowed unchanged.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if !needs_work(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = strip_ci(rest, "ref=") {
            out.push_str(&rest[..3]);
            out.push(':');
            rest = tail;
        } else if let Some(tail) = at_ref(rest) {
            out.push_str("(at)");
            rest = tail;
        } else if let Some((digits, tail)) = index_ref(rest) {
            out.push('(');
            out.push_str(digits);
            out.push_str(")<");
            rest = tail;
        } else {
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out.into()
}

fn needs_work(text: &str) -> bool {
    // Every token holds one of these bytes; most text has none of `@`, `[`, `=`.
    memchr::memchr3(b'@', b'[', b'=', text.as_bytes()).is_some()
}

/// Case-insensitive prefix strip for an ASCII needle.
fn strip_ci<'a>(text: &'a str, needle: &str) -> Option<&'a str> {
    let head = text.get(..needle.len())?;
    head.eq_ignore_ascii_case(needle).then(|| &text[needle.len()..])
}

/// `@e12` (agent-browser): returns the text after the `@`.
fn at_ref(text: &str) -> Option<&str> {
    let tail = text.strip_prefix('@')?;
    let mut chars = tail.chars();
    (chars.next()? == 'e' && chars.next()?.is_ascii_digit()).then_some(tail)
}

/// `[33]<` (browser-use): returns the digits and the text after `]<`.
fn index_ref(text: &str) -> Option<(&str, &str)> {
    let tail = text.strip_prefix('[')?;
    let end = tail.find(|c: char| !c.is_ascii_digit())?;
    if end == 0 {
        return None;
    }
    let after = tail[end..].strip_prefix("]<")?;
    Some((&tail[..end], after))
}

/// True when `text` holds something that reads as an actionable ref token.
pub fn has_ref_token(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("[ref=")
        || lower.contains("ref=")
        || text.match_indices('@').any(|(i, _)| at_ref(&text[i..]).is_some())
        || text.match_indices('[').any(|(i, _)| index_ref(&text[i..]).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rewrites_every_token_kind() {
        assert_eq!(neutralise("button [ref=e5]"), "button [ref:e5]");
        assert_eq!(neutralise("[level=1, REF=f1e3]"), "[level=1, REF:f1e3]");
        assert_eq!(neutralise("click @e4 now"), "click (at)e4 now");
        assert_eq!(neutralise("[33]<button>"), "(33)<button>");
        assert_eq!(neutralise("ada@example.com [x] [12] °C"), "ada@example.com [x] [12] °C");
    }

    proptest! {
        #[test]
        fn output_never_holds_a_ref_token(s in ".*", t in "(\\[ref=e[0-9]{1,3}\\]|@e[0-9]|\\[[0-9]{1,2}\\]<|ref=| |x|\\[|@|<|é)*") {
            let joined = format!("{s}{t}{s}");
            let out = neutralise(&joined);
            prop_assert!(!has_ref_token(&out), "{:?} -> {:?}", joined, out);
            let again = neutralise(&out);
            prop_assert_eq!(again.as_ref(), out.as_ref());
        }
    }
}
