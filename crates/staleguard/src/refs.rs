//! The ref grammar, in one place: what a ref id is, where refs sit in call arguments, and
//! ref tokens in text: finding them, neutralising them in text we render ourselves
//! (receipts, evidence, the archive) so that page text carried there can never pose as an
//! actionable ref, and rescoping them to name their document (the MCP guard).
//!
//! Public for the MCP guard, which scopes the refs of every result it relays to their
//! document ([`rescope`], [`split_scoped`]) and finds the refs of call arguments
//! ([`REF_KEYS`], [`REF_LISTS`]); tests and fuzz targets check through `internal` that no text
//! we render carries a live ref ([`has_ref_token`], [`neutralise`]).

use std::borrow::Cow;

use serde_json::Value;

/// True for a ref id: `[A-Za-z0-9_-]+`.
pub(crate) fn is_ref_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(is_id_byte)
}

fn is_id_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Argument keys that carry refs, at the top level or inside the items of a
/// [`REF_LISTS`] array: Playwright MCP's `ref`/`target` family, Chrome DevTools MCP's uids.
pub const REF_KEYS: &[&str] = &[
    "ref",
    "target",
    "startRef",
    "endRef",
    "startTarget",
    "endTarget",
    "uid",
    "from_uid",
    "to_uid",
];

/// Arguments whose items carry refs of their own: Playwright MCP's `fields[]`
/// (`browser_fill_form`), Chrome DevTools MCP's `elements[]` (`fill_form`).
pub const REF_LISTS: &[&str] = &["fields", "elements"];

/// Argument keys whose strings are words, not commands: the model's description of the
/// element (`element`), text to type or pick (`text`, `value`). An `@e5` in them is no ref
/// to act on (`me@e5.org`, "the Save button (@e5)"); the call's ref keys say what it acts on.
const WORDS_KEYS: &[&str] = &["element", "text", "value", "description"];

/// The objects of a call's arguments whose [`REF_KEYS`] name refs: the arguments
/// themselves, then each item of a [`REF_LISTS`] array.
pub(crate) fn ref_holders(
    args: &serde_json::Map<String, Value>,
) -> impl Iterator<Item = &serde_json::Map<String, Value>> {
    let items = REF_LISTS
        .iter()
        .filter_map(|key| args.get(*key)?.as_array())
        .flatten()
        .filter_map(Value::as_object);
    std::iter::once(args).chain(items)
}

/// The refs a call's arguments name: every ref-bearing key, those of [`REF_LISTS`] items, and
/// agent-browser `@eN` tokens in string arguments but the model's words (`WORDS_KEYS`).
pub fn targets(arguments: &str) -> Vec<String> {
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
        return at_refs(arguments);
    };
    let mut refs = Vec::new();
    let mut take = |object: &serde_json::Map<String, Value>| {
        for key in REF_KEYS {
            if let Some(Value::String(r)) = object.get(*key) {
                let id = r.trim_start_matches('@');
                if looks_like_ref(id) {
                    refs.push(id.to_string());
                }
            }
        }
    };
    ref_holders(&args).for_each(&mut take);
    for (key, value) in &args {
        match value {
            Value::String(s) if !WORDS_KEYS.contains(&key.as_str()) => refs.extend(at_refs(s)),
            _ => {}
        }
    }
    refs.sort();
    refs.dedup();
    refs
}

/// True for a value that can be a ref: a [`is_ref_id`] with a digit in it (`e12`, `f1e3`,
/// `4_5`, `1-0-4`, `33`). Playwright also takes a selector as `target`
/// (`button:has-text("Run test")`, `#submit`): that names no ref, and no page can make it
/// stale.
fn looks_like_ref(id: &str) -> bool {
    is_ref_id(id) && id.bytes().any(|b| b.is_ascii_digit())
}

/// The page a call names (Chrome DevTools MCP's `pageId`, a number or a string), which scopes
/// its refs: a uid is resolved on that page's newest snapshot.
pub(crate) fn page_id(arguments: &str) -> Option<String> {
    if !arguments.contains("pageId") {
        return None;
    }
    let args: Value = serde_json::from_str(arguments).ok()?;
    page_id_of(args.get("pageId")?)
}

/// A `pageId` argument's value as `page_id` reads it.
pub(crate) fn page_id_of(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

/// `@e12` tokens (agent-browser commands such as `click @e4`): the ids, without the `@`. A
/// token starts a word: the `@` of `me@e5.org` or `e*@e172` starts none.
pub(crate) fn at_refs(text: &str) -> Vec<String> {
    text.match_indices('@')
        .filter(|&(i, _)| starts_word(text, i))
        .filter_map(|(i, _)| {
            let tail = at_ref(text.get(i..)?)?;
            let end = tail
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(tail.len());
            let id = tail.get(..end)?;
            id.get(1..)
                .is_some_and(|digits| digits.bytes().all(|b| b.is_ascii_digit()))
                .then(|| id.to_string())
        })
        .collect()
}

/// True when byte `at` of `text` starts a word: nothing before it, or a space or an opening
/// quote or bracket.
fn starts_word(text: &str, at: usize) -> bool {
    text.get(..at)
        .and_then(|before| before.chars().next_back())
        .is_none_or(|c| {
            c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '(' | '[' | '{' | ',' | '=')
        })
}

/// Rewrites every `ref=<id>` that follows `[` or a space, and that `is_ref` accepts, to name
/// document `doc`: `[ref=e7]` becomes `[ref=d3e7]`. Other text is copied as it is.
pub fn rescope<'a>(text: &'a str, doc: u32, is_ref: impl Fn(&str) -> bool) -> Cow<'a, str> {
    let prefix = format!("d{doc}");
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut done = 0;
    for at in memchr::memmem::find_iter(bytes, b"ref=") {
        if !matches!(at.checked_sub(1).map(|b| bytes[b]), Some(b'[' | b' ')) {
            continue;
        }
        let start = at + 4;
        let len = bytes[start..]
            .iter()
            .position(|b| !is_id_byte(*b))
            .unwrap_or(bytes.len() - start);
        // ASCII bytes only: the slice ends on a char boundary.
        let id = &text[start..start + len];
        if id.is_empty() || !is_ref(id) {
            continue;
        }
        if out.is_empty() {
            out.reserve(text.len() + text.len() / 16);
        }
        out.push_str(&text[done..start]);
        out.push_str(&prefix);
        out.push_str(id);
        done = start + len;
    }
    if done == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

/// Splits a ref that [`rescope`] wrote (`d3e7`) into its document number and the server's
/// ref. Server refs start with a letter (`e7`, `f1e3`, `s1e2`), so the number ends at the
/// first non-digit. `None` for anything else, a server's own ref included.
pub fn split_scoped(scoped: &str) -> Option<(u32, &str)> {
    let rest = scoped.strip_prefix('d')?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    if digits == 0 {
        return None;
    }
    let (number, id) = rest.split_at(digits);
    let doc = number.parse().ok()?;
    id.starts_with(|c: char| c.is_ascii_alphabetic())
        .then_some((doc, id))
}

/// Undoes [`rescope`]: every ref token after `[` or a space that [`split_scoped`] reads as
/// ours (`ref=d3e7`) becomes the server's (`ref=e7`). An observation's ID is taken over this
/// form, so the page the MCP guard relayed with scoped refs and the page the model was sent
/// have one ID. Text without such tokens is borrowed unchanged.
pub(crate) fn unscoped(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut done = 0;
    // `=d` is searched rather than `ref=d`: a page's tree holds `ref=e` on every line, and
    // the searcher would stop at each of them to compare the rest.
    for eq in memchr::memmem::find_iter(bytes, b"=d") {
        let Some(at) = eq
            .checked_sub(3)
            .filter(|&at| bytes.get(at..eq) == Some(b"ref"))
        else {
            continue;
        };
        if !matches!(at.checked_sub(1).map(|b| bytes[b]), Some(b'[' | b' ')) {
            continue;
        }
        let start = at + 4;
        let len = bytes[start..]
            .iter()
            .position(|b| !is_id_byte(*b))
            .unwrap_or(bytes.len() - start);
        // ASCII bytes only: the token ends on a char boundary.
        let Some((_, id)) = split_scoped(&text[start..start + len]) else {
            continue;
        };
        out.push_str(&text[done..start]);
        done = start + len - id.len();
    }
    if done == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

/// Rewrites every ref token so that no format would read it as a ref:
/// `ref=e5` becomes `ref:e5`, a Chrome DevTools MCP `uid=4_5` becomes `uid:4_5`, `@e5`
/// becomes `(at)e5`, and a browser-use index `[33]<` becomes `(33)<`. Text without such tokens is borrowed unchanged.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if !needs_work(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    // Start of the text not yet copied to `out`; candidates before it were consumed.
    let mut done = 0;
    // Every token holds `=`, `@` or `[`: jump from one of those bytes to the next.
    for at in memchr::memchr3_iter(b'=', b'@', b'[', text.as_bytes()) {
        let Some((start, end)) = token_span(text, at) else {
            continue;
        };
        if start < done {
            continue;
        }
        out.push_str(text.get(done..start).unwrap_or(""));
        push_neutral(&mut out, text.get(start..end).unwrap_or(""));
        done = end;
    }
    out.push_str(text.get(done..).unwrap_or(""));
    out.into()
}

/// Where the token whose marker byte (`=`, `@` or `[`) is at `at` starts and ends.
fn token_span(text: &str, at: usize) -> Option<(usize, usize)> {
    let rest = text.get(at..)?;
    match rest.as_bytes().first()? {
        b'=' => {
            let start = at.checked_sub(3)?;
            let key = text.get(start..at)?;
            (key.eq_ignore_ascii_case("ref")
                || key.eq_ignore_ascii_case("uid") && uid_follows(rest))
            .then_some((start, at + 1))
        }
        b'@' => at_ref(rest).map(|_| (at, at + 1)),
        _ => index_ref(rest).map(|(_, tail)| (at, text.len() - tail.len())),
    }
}

/// `=` and a digit: the start of a Chrome DevTools MCP uid (`uid=4_5`) after `uid`.
fn uid_follows(from_equals: &str) -> bool {
    from_equals
        .as_bytes()
        .get(1)
        .is_some_and(u8::is_ascii_digit)
}

/// Writes the neutral form of a whole token: `ref=` or `uid=` (any case) becomes `ref:`, `@` becomes
/// `(at)`, `[33]<` becomes `(33)<`.
fn push_neutral(out: &mut String, token: &str) {
    if let Some(index) = token.strip_prefix('[') {
        out.push('(');
        out.push_str(index.strip_suffix("]<").unwrap_or(index));
        out.push_str(")<");
    } else if token == "@" {
        out.push_str("(at)");
    } else {
        out.push_str(token.strip_suffix('=').unwrap_or(token));
        out.push(':');
    }
}

fn needs_work(text: &str) -> bool {
    // Every token holds one of these bytes; most text has none of `@`, `[`, `=`.
    memchr::memchr3(b'@', b'[', b'=', text.as_bytes()).is_some()
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
        || lower
            .match_indices("uid=")
            .any(|(i, _)| uid_follows(&lower[i + 3..]))
        || text
            .match_indices('@')
            .any(|(i, _)| at_ref(&text[i..]).is_some())
        || text
            .match_indices('[')
            .any(|(i, _)| index_ref(&text[i..]).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unscoped_undoes_rescope() {
        let tree =
            "- button \"Go\" [ref=e7]\n- ref=f1e4 [unchanged]\n- text: see [ref=e99] and xref=e7";
        let scoped = rescope(tree, 12, |id| id != "e99");
        assert_ne!(scoped, tree);
        assert_eq!(unscoped(&scoped), tree);
        // Not ours: no digits, or no letter after them.
        for kept in ["[ref=d7]", "[ref=dx7]", "[ref=d12]", "xref=d3e7", "[ref=d]"] {
            assert!(matches!(unscoped(kept), Cow::Borrowed(_)), "{kept}");
        }
    }

    /// Playwright takes a selector where it takes a ref: a selector names no ref.
    #[test]
    fn a_selector_target_names_no_ref() {
        let args =
            |target: &str| serde_json::json!({"element": "Run", "target": target}).to_string();
        for selector in [
            "button:has-text(\"Run test\")",
            "#submit",
            "button",
            "text=Place order",
            "[data-test=go]",
            "",
        ] {
            assert!(targets(&args(selector)).is_empty(), "{selector}");
        }
        for id in ["e12", "f1e3", "4_5", "1-0-4", "33", "@e4"] {
            assert_eq!(targets(&args(id)), [id.trim_start_matches('@')], "{id}");
        }
    }

    /// Found by the `description` fuzz target: a description `e*@e172` named ref e172, and
    /// the call was refused for a ref it does not act on. An `@eN` names a ref where it
    /// starts a word of a command, not in the words the model describes or types.
    #[test]
    fn an_at_token_names_a_ref_only_where_it_starts_a_word_of_a_command() {
        let command = |c: &str| serde_json::json!({"command": c}).to_string();
        assert_eq!(targets(&command("click @e4")), ["e4"]);
        assert_eq!(targets(&command("fill '@e7' \"x\"")), ["e7"]);
        assert_eq!(targets(&command("@e2")), ["e2"]);
        for text in ["mail me@e5.org", "e*@e172", "a@e1"] {
            assert!(targets(&command(text)).is_empty(), "{text}");
        }
        let typed = serde_json::json!({"ref": "e3", "element": "Save (@e9)", "text": "@e8 x@e7"});
        assert_eq!(targets(&typed.to_string()), ["e3"]);
        assert_eq!(at_refs("click @e4 then @e5"), ["e4", "e5"]);
        assert!(at_refs("bob@e5.org").is_empty());
    }

    proptest! {
        #[test]
        fn unscoped_inverts_rescope_on_any_text(text in ".{0,200}", doc in 0u32..1000) {
            let clean = unscoped(&text).into_owned();
            // The guard scopes server refs, which start with a letter.
            let server_ref = |id: &str| is_ref_id(id) && id.starts_with(|c: char| c.is_ascii_alphabetic());
            let scoped = rescope(&clean, doc, server_ref).into_owned();
            prop_assert_eq!(unscoped(&scoped), clean.as_str());
        }
    }

    #[test]
    fn rewrites_every_token_kind() {
        assert_eq!(neutralise("button [ref=e5]"), "button [ref:e5]");
        assert_eq!(neutralise("[level=1, REF=f1e3]"), "[level=1, REF:f1e3]");
        assert_eq!(neutralise("click @e4 now"), "click (at)e4 now");
        assert_eq!(neutralise("[33]<button>"), "(33)<button>");
        assert_eq!(
            neutralise("uid=4_5 button, UID=12_0"),
            "uid:4_5 button, UID:12_0"
        );
        assert_eq!(neutralise("uid=x fluid=a"), "uid=x fluid=a");
        assert!(has_ref_token("  uid=1_10 link \"Home\""));
        assert!(!has_ref_token("uid=abc, uid:4_5"));
        assert_eq!(
            neutralise("ada@example.com [x] [12] °C"),
            "ada@example.com [x] [12] °C"
        );
    }

    /// The original char-by-char rewrite, kept as the oracle for the jumping one.
    fn neutralise_by_char(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            let key = rest.get(..4);
            let is_ref = key.is_some_and(|h| h.eq_ignore_ascii_case("ref="));
            let is_uid = key.is_some_and(|h| h.eq_ignore_ascii_case("uid="))
                && rest.as_bytes().get(4).is_some_and(u8::is_ascii_digit);
            if is_ref || is_uid {
                out.push_str(&rest[..3]);
                out.push(':');
                rest = &rest[4..];
            } else if let Some(tail) = at_ref(rest) {
                out.push_str("(at)");
                rest = tail;
            } else if let Some((digits, tail)) = index_ref(rest) {
                out.push_str(&format!("({digits})<"));
                rest = tail;
            } else {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
        out
    }

    proptest! {
        #[test]
        fn jumping_agrees_with_char_by_char(s in "(ref=|REF=|rEf|uid=|UiD=4|uid|_|=|@e1|@|\\[12\\]<|\\[|\\]<|1|e|é|x|\\PC)*") {
            let (fast, slow) = (neutralise(&s), neutralise_by_char(&s));
            prop_assert_eq!(fast.as_ref(), slow.as_str());
        }

        #[test]
        fn output_never_holds_a_ref_token(s in ".*", t in "(\\[ref=e[0-9]{1,3}\\]|uid=[0-9]_[0-9]|@e[0-9]|\\[[0-9]{1,2}\\]<|ref=| |x|\\[|@|<|é)*") {
            let joined = format!("{s}{t}{s}");
            let out = neutralise(&joined);
            prop_assert!(!has_ref_token(&out), "{:?} -> {:?}", joined, out);
            let again = neutralise(&out);
            prop_assert_eq!(again.as_ref(), out.as_ref());
        }
    }
}
