//! Shared parser for Playwright-style aria snapshot lines.
//!
//! Playwright MCP (every era) and agent-browser print a page as YAML-like lines:
//! `<indent>- <role>[ "<name>"][ [attr]...][: <text>|:]`. Refs are read only from the
//! attribute brackets that directly follow the role and name, never from the text after
//! `: ` or from inside a quoted name, so page text that merely contains `[ref=x]` never
//! becomes a ref. The parser borrows from the input and allocates only to unescape.

use std::borrow::Cow;

use memchr::memchr;

use super::{Control, ElementRef, Observation};

/// Roles the model can act on. Their role, name, value and states form the page's controls.
pub const CONTROL_ROLES: &[&str] = &[
    "button",
    "link",
    "textbox",
    "searchbox",
    "checkbox",
    "radio",
    "combobox",
    "listbox",
    "option",
    "spinbutton",
    "slider",
    "switch",
    "tab",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "treeitem",
];

/// Roles whose accessible name is page text that is not repeated as a text child.
/// `StaticText` is how agent-browser prints text nodes.
const NAMED_TEXT_ROLES: &[&str] = &[
    "heading",
    "cell",
    "gridcell",
    "columnheader",
    "rowheader",
    "StaticText",
];

/// Attributes that are not page state: refs, focus, cursor hints, agent-browser's duplicate
/// index and link targets. Leaving them out keeps fingerprints stable across re-renders.
const NON_STATE_PREFIXES: &[&str] = &["ref=", "cursor=", "nth=", "url="];

/// True for roles listed in [`CONTROL_ROLES`].
pub fn is_control_role(role: &str) -> bool {
    CONTROL_ROLES.contains(&role)
}

/// What a parsed tree contained, beyond what it added to the observation.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TreeStats {
    /// Lines that parsed as nodes (including `ref=eN [unchanged]` lines).
    pub nodes: usize,
    /// True when the tree is an incremental diff: it has `<changed>` or `[unchanged]` lines.
    pub diff: bool,
}

/// Parses every line of `tree` and appends its refs, controls and chunks to `obs`.
pub fn parse_tree<'a>(tree: &'a str, obs: &mut Observation<'a>) -> TreeStats {
    let mut stats = TreeStats::default();
    for line in lines(tree) {
        parse_line(line.text, obs, &mut stats);
    }
    stats
}

/// One line of text: its start offset, the offset of the next line, and the text without
/// the line break (`\n` or `\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    pub start: usize,
    pub next: usize,
    pub text: &'a str,
}

/// Iterates the lines of `text` with `memchr`.
pub fn lines(text: &str) -> Lines<'_> {
    Lines { text, pos: 0 }
}

/// Iterator returned by [`lines`].
#[derive(Debug, Clone)]
pub struct Lines<'a> {
    text: &'a str,
    pos: usize,
}

impl Lines<'_> {
    /// Continues at byte `pos` of the text (the start of a line).
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }
}

impl<'a> Iterator for Lines<'a> {
    type Item = Line<'a>;

    fn next(&mut self) -> Option<Line<'a>> {
        let start = self.pos;
        let rest = self.text.get(start..).filter(|r| !r.is_empty())?;
        let len = memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
        self.pos = start + len + 1;
        // `\n` is ASCII, so `len` is always a char boundary.
        let line = rest.get(..len).unwrap_or(rest);
        let text = line.strip_suffix('\r').unwrap_or(line);
        Some(Line {
            start,
            next: self.pos.min(self.text.len()),
            text,
        })
    }
}

/// Parses one tree line into `obs`. Lines that are not nodes (property lines such as
/// `- /url: ...`, prose, broken quoting) are skipped.
pub fn parse_line<'a>(line: &'a str, obs: &mut Observation<'a>, stats: &mut TreeStats) {
    let Some(rest) = line.trim_start().strip_prefix("- ") else {
        return;
    };
    let rest = match rest.strip_prefix("<changed> ") {
        Some(changed) => {
            stats.diff = true;
            changed
        }
        None => rest,
    };
    if let Some(id) = unchanged_ref(rest) {
        stats.diff = true;
        stats.nodes += 1;
        obs.refs.push(ElementRef {
            id: Cow::Borrowed(id),
            role: Cow::Borrowed(""),
            name: Cow::Borrowed(""),
        });
        return;
    }
    let Some((src, key, after)) = split_key(rest) else {
        return;
    };
    stats.nodes += 1;
    emit(&src, &key, value_of(after), obs);
}

/// Counts the refs [`parse_tree`] would find, and tells whether the tree is a diff, without
/// building anything. Only lines holding `ref=` or `<changed>` are looked at; they are found
/// by SIMD search, and each is read by the same key parser as [`parse_line`].
pub fn count_refs(tree: &str) -> (usize, bool) {
    let bytes = tree.as_bytes();
    let (mut count, mut diff) = (0, false);
    let mut next_line = 0;
    for hit in memchr::memmem::find_iter(bytes, b"ref=") {
        if hit < next_line {
            continue;
        }
        let start = memchr::memrchr(b'\n', &bytes[..hit]).map_or(0, |i| i + 1);
        let end = memchr(b'\n', &bytes[hit..]).map_or(bytes.len(), |i| hit + i);
        next_line = end + 1;
        let line = tree.get(start..end).unwrap_or("");
        let (has_ref, changed) = line_ref(line.strip_suffix('\r').unwrap_or(line));
        count += usize::from(has_ref);
        diff |= changed;
    }
    // A changed node without a ref (`- <changed> text: ...`) still marks a diff.
    diff = diff
        || memchr::memmem::find_iter(bytes, b"- <changed> ").any(|at| {
            let start = memchr::memrchr(b'\n', &bytes[..at]).map_or(0, |i| i + 1);
            tree.get(start..at).is_some_and(|indent| indent.trim_start().is_empty())
        });
    (count, diff)
}

/// Whether a tree line carries a ref, and whether it is a diff line; as [`parse_line`] reads it.
fn line_ref(line: &str) -> (bool, bool) {
    let Some(rest) = line.trim_start().strip_prefix("- ") else {
        return (false, false);
    };
    let (rest, changed) = match rest.strip_prefix("<changed> ") {
        Some(r) => (r, true),
        None => (rest, false),
    };
    if unchanged_ref(rest).is_some() {
        return (true, true);
    }
    let Some((src, key, _)) = split_key(rest) else {
        return (false, changed);
    };
    let mut found = false;
    attr_items(&src, key.attrs, |(a, b)| {
        let item = src.get(a..b).unwrap_or("");
        found |= item.strip_prefix("ref=").is_some_and(is_ref_id);
    });
    (found, changed)
}

/// `ref=e4 [unchanged]`: a subtree the diff leaves as it was; its ref is still on the page.
fn unchanged_ref(rest: &str) -> Option<&str> {
    let (id, tail) = rest.strip_prefix("ref=")?.split_once(' ')?;
    (tail.trim_end() == "[unchanged]" && is_ref_id(id)).then_some(id)
}

/// True for a ref id: `[A-Za-z0-9_-]+`.
pub fn is_ref_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Byte range into the key source.
type Span = (usize, usize);

/// The key of a node line: its role, the raw (still escaped) quoted name, and the region
/// holding the attribute brackets.
#[derive(Debug, Clone, Copy)]
struct Key {
    role: Span,
    name: Option<Span>,
    attrs: Span,
}

/// Splits a node line (after `- `) into its key and what follows the key. YAML single-quotes
/// a key that contains `: ` (`- 'link "Review: X" [ref=e8]':`); such a key is unquoted first,
/// into an owned string only when it contains a doubled quote.
fn split_key(rest: &str) -> Option<(Cow<'_, str>, Key, &str)> {
    if let Some(quoted) = rest.strip_prefix('\'') {
        let end = single_quote_end(quoted)?;
        let inner = quoted.get(..end)?;
        let after = quoted.get(end + 1..)?;
        let src = if inner.contains("''") {
            Cow::Owned(inner.replace("''", "'"))
        } else {
            Cow::Borrowed(inner)
        };
        let (key, _) = parse_key(&src)?;
        return Some((src, key, after));
    }
    let (key, used) = parse_key(rest)?;
    Some((Cow::Borrowed(rest), key, rest.get(used..)?))
}

/// Index of the quote that closes a YAML single-quoted scalar (`''` is an escaped quote).
fn single_quote_end(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            if b.get(i + 1) == Some(&b'\'') {
                i += 2;
                continue;
            }
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Parses `role[ "name"][ [attrs]...]` at the start of `s`; returns the key and its length.
fn parse_key(s: &str) -> Option<(Key, usize)> {
    let b = s.as_bytes();
    let role_end = b
        .iter()
        .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-'))
        .unwrap_or(b.len());
    // Property lines (`/url:`) and anything else that does not start with a letter are no node.
    if !b.first()?.is_ascii_alphabetic() {
        return None;
    }
    let (name, mut pos) = match name_at(s, role_end)? {
        Some((span, end)) => (Some(span), end),
        None => (None, role_end),
    };
    let attrs_start = pos;
    while let Some(r) = s.get(pos..).and_then(|r| r.strip_prefix(" [")) {
        let Some(close) = memchr(b']', r.as_bytes()) else {
            break;
        };
        pos += 2 + close + 1;
    }
    let attrs = (attrs_start, pos);
    pos += hint_len(s.get(pos..).unwrap_or(""));
    Some((
        Key {
            role: (0, role_end),
            name,
            attrs,
        },
        pos,
    ))
}

/// The name after the role: `Ok(None)` when there is none, `None` when it is broken (an
/// unterminated quote), so a broken line yields no ref at all.
fn name_at(s: &str, pos: usize) -> Option<Option<(Span, usize)>> {
    let rest = s.get(pos..)?;
    if let Some(q) = rest.strip_prefix(" \"") {
        let end = closing_double_quote(q)?;
        let start = pos + 2;
        return Some(Some(((start, start + end), start + end + 1)));
    }
    // Playwright prints a name that starts and ends with `/` bare, as a regex would be.
    if let Some(r) = rest.strip_prefix(" /") {
        let stop = r.find(" [").unwrap_or(r.trim_end_matches(':').len());
        let last = r.get(..stop)?.rfind('/').map_or(0, |i| i + 1);
        let start = pos + 1;
        return Some(Some(((start, start + 1 + last), start + 1 + last)));
    }
    Some(None)
}

/// Index of the unescaped `"` that closes a double-quoted string.
fn closing_double_quote(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// agent-browser prints cursor-interactive hints after the attributes:
/// ` clickable [cursor:pointer, onclick]`. They are skipped, and never read for refs.
fn hint_len(rest: &str) -> usize {
    for kind in [" clickable [", " focusable [", " editable ["] {
        if let Some(r) = rest.strip_prefix(kind) {
            return memchr(b']', r.as_bytes()).map_or(0, |close| kind.len() + close + 1);
        }
    }
    0
}

/// The text after the key: `: <text>` (YAML-unquoted), or nothing for `:` and bare keys.
fn value_of(after: &str) -> Option<Cow<'_, str>> {
    let v = after.strip_prefix(':')?.trim();
    (!v.is_empty()).then(|| unquote(v))
}

/// Removes YAML quoting from a scalar: `"..."` (JSON escapes), `'...'` (`''`), or plain.
pub fn unquote(v: &str) -> Cow<'_, str> {
    if v.len() >= 2 && v.starts_with('"') && v.ends_with('"') {
        return unescape(v.get(1..v.len() - 1).unwrap_or(""));
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        let inner = v.get(1..v.len() - 1).unwrap_or("");
        return if inner.contains("''") {
            Cow::Owned(inner.replace("''", "'"))
        } else {
            Cow::Borrowed(inner)
        };
    }
    Cow::Borrowed(v)
}

/// Resolves the backslash escapes of a double-quoted string (JSON / YAML style). Borrows
/// when there is no escape.
pub fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('0') => out.push('\0'),
            Some('u') => out.push(unicode_escape(&mut chars)),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    Cow::Owned(out)
}

/// Decodes the `XXXX` of a `\uXXXX` escape, joining surrogate pairs; U+FFFD when invalid.
fn unicode_escape(chars: &mut std::str::Chars<'_>) -> char {
    let Some(high) = hex4(chars) else {
        return '\u{FFFD}';
    };
    if (0xD800..0xDC00).contains(&high) {
        let mut look = chars.clone();
        if look.as_str().starts_with("\\u") {
            look.nth(1);
            if let Some(low @ 0xDC00..=0xDFFF) = hex4(&mut look) {
                *chars = look;
                let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                return char::from_u32(c).unwrap_or('\u{FFFD}');
            }
        }
    }
    char::from_u32(high).unwrap_or('\u{FFFD}')
}

/// Reads four hex digits from `chars`.
fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let s = chars.as_str();
    let digits = s.get(..4)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = u32::from_str_radix(digits, 16).ok()?;
    *chars = s.get(4..)?.chars();
    Some(v)
}

/// A slice of the key source with the source's lifetime (borrowed when the source is).
fn span<'a>(src: &Cow<'a, str>, (a, b): Span) -> Cow<'a, str> {
    match src {
        Cow::Borrowed(s) => Cow::Borrowed(s.get(a..b).unwrap_or("")),
        Cow::Owned(s) => Cow::Owned(s.get(a..b).unwrap_or("").to_owned()),
    }
}

/// Unescapes a name taken from the key source, keeping the borrow when possible.
fn unescape_cow(raw: Cow<'_, str>) -> Cow<'_, str> {
    match raw {
        Cow::Borrowed(s) => unescape(s),
        Cow::Owned(s) => Cow::Owned(unescape(&s).into_owned()),
    }
}

/// Calls `f` with the span of every comma-separated item of every attribute bracket:
/// `[level=1] [ref=e2]` and `[level=1, ref=e1]` both give `level=1` and the ref.
fn attr_items(src: &str, (start, end): Span, mut f: impl FnMut(Span)) {
    let Some(region) = src.get(start..end) else {
        return;
    };
    let mut item = 0;
    for (i, b) in region.bytes().enumerate() {
        match b {
            b'[' => item = i + 1,
            b',' | b']' => {
                let text = region.get(item..i).unwrap_or("");
                let lead = text.len() - text.trim_start().len();
                let trimmed = text.trim();
                if !trimmed.is_empty() {
                    let a = start + item + lead;
                    f((a, a + trimmed.len()));
                }
                item = i + 1;
            }
            _ => {}
        }
    }
}

/// True for an attribute that describes page state (kept in the control's states).
fn is_state(attr: &str) -> bool {
    attr != "active" && !NON_STATE_PREFIXES.iter().any(|p| attr.starts_with(p))
}

/// Adds the node's ref, control and text chunks to `obs`.
// `&Cow` rather than `&str`: whether the source borrows from the input decides whether the
// parts can borrow with the input's lifetime.
#[allow(clippy::ptr_arg)]
fn emit<'a>(src: &Cow<'a, str>, key: &Key, value: Option<Cow<'a, str>>, obs: &mut Observation<'a>) {
    let role = span(src, key.role);
    let name = key.name.map(|n| unescape_cow(span(src, n)));
    let control = is_control_role(&role);
    let mut id = None;
    let mut states = Vec::new();
    attr_items(src, key.attrs, |item| {
        let text = src.get(item.0..item.1).unwrap_or("");
        if let Some(r) = text.strip_prefix("ref=") {
            if id.is_none() && is_ref_id(r) {
                id = Some(span(src, (item.0 + 4, item.1)));
            }
        } else if control && is_state(text) {
            states.push(span(src, item));
        }
    });
    if let Some(id) = id {
        obs.refs.push(ElementRef {
            id,
            role: role.clone(),
            name: name.clone().unwrap_or(Cow::Borrowed("")),
        });
    }
    if control {
        states.sort();
        obs.controls.push(Control {
            role,
            name: name.unwrap_or(Cow::Borrowed("")),
            value,
            states,
        });
        return;
    }
    if let Some(name) = name.filter(|n| !n.is_empty()) {
        if NAMED_TEXT_ROLES.contains(&role.as_ref()) {
            obs.chunks.push(name);
        }
    }
    obs.chunks.extend(value);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::TreeKind;

    fn tree(text: &str) -> (Observation<'_>, TreeStats) {
        let mut obs = Observation::new("test", TreeKind::Full);
        let stats = parse_tree(text, &mut obs);
        (obs, stats)
    }

    fn ids<'a>(obs: &'a Observation<'_>) -> Vec<&'a str> {
        obs.refs.iter().map(|r| r.id.as_ref()).collect()
    }

    fn chunks<'a>(obs: &'a Observation<'_>) -> Vec<&'a str> {
        obs.chunks.iter().map(|c| c.as_ref()).collect()
    }

    #[test]
    fn playwright_separate_brackets() {
        let (obs, stats) = tree(
            "- heading \"Order a widget\" [level=1] [ref=e2]\n\
             - link \"Home\" [ref=e17] [cursor=pointer]:\n  - /url: ../index.html\n\
             - checkbox \"Weekly digest\" [checked] [active] [ref=f2e6]\n\
             - textbox \"Name\" [ref=e7]: Ada Lovelace\n\
             - paragraph [ref=e4]: \"Order total: $59.97\"\n\
             - text: Name\n\
             - option \"Red\" [selected]",
        );
        assert_eq!(ids(&obs), ["e2", "e17", "f2e6", "e7", "e4"]);
        assert_eq!(obs.refs[0].role, "heading");
        assert_eq!(obs.refs[0].name, "Order a widget");
        assert_eq!(obs.refs[4].name, "");
        assert_eq!(
            stats,
            TreeStats {
                nodes: 7,
                diff: false
            }
        );
        let c: Vec<_> = obs
            .controls
            .iter()
            .map(|c| {
                (
                    c.role.as_ref(),
                    c.name.as_ref(),
                    c.value.as_deref(),
                    c.states.clone(),
                )
            })
            .collect();
        assert_eq!(
            c,
            [
                ("link", "Home", None, vec![]),
                (
                    "checkbox",
                    "Weekly digest",
                    None,
                    vec![Cow::Borrowed("checked")]
                ),
                ("textbox", "Name", Some("Ada Lovelace"), vec![]),
                ("option", "Red", None, vec![Cow::Borrowed("selected")]),
            ]
        );
        assert_eq!(
            chunks(&obs),
            ["Order a widget", "Order total: $59.97", "Name"]
        );
    }

    #[test]
    fn agent_browser_single_bracket() {
        let (obs, _) = tree(
            "- heading \"Title\" [level=1, ref=e1]\n\
             - button \"Submit\" [ref=e4]\n\
             - checkbox \"Terms\" [checked=false, required, ref=e5]\n\
             - link \"Docs\" [ref=e6, url=https://x.test/docs] clickable [cursor:pointer, onclick]\n\
             - StaticText \"Hello there\"",
        );
        assert_eq!(ids(&obs), ["e1", "e4", "e5", "e6"]);
        assert_eq!(obs.controls[1].states, ["checked=false", "required"]);
        assert!(obs.controls[2].states.is_empty());
        assert_eq!(chunks(&obs), ["Title", "Hello there"]);
    }

    #[test]
    fn refs_only_from_attribute_brackets() {
        let (obs, _) = tree(
            "- paragraph [ref=e3]: see [ref=e99] here\n\
             - text: \"[ref=e5]\"\n\
             - button \"Click [ref=e8] now\" [ref=e9]\n\
             - button \"unterminated [ref=e10]\n\
             - generic: x [ref=e11]",
        );
        assert_eq!(ids(&obs), ["e3", "e9"]);
        assert_eq!(obs.refs[1].name, "Click [ref=e8] now");
        assert_eq!(
            chunks(&obs),
            ["see [ref=e99] here", "[ref=e5]", "x [ref=e11]"]
        );
    }

    #[test]
    fn escaped_names_and_quoted_keys() {
        let (obs, _) = tree(
            "- heading \"3 results for \\\"home battery\\\"\" [level=1] [ref=f2e2]\n\
             - 'link \"Review: Northwind H2 home battery\" [ref=f2e8] [cursor=pointer]':\n\
             - 'heading \"It''s: here\" [level=2] [ref=e3]'\n\
             - paragraph [ref=e4]: \"\\\"The drop,\\\" said \\u00e9\\ud83d\\ude00\"",
        );
        assert_eq!(ids(&obs), ["f2e2", "f2e8", "e3", "e4"]);
        assert_eq!(obs.refs[0].name, "3 results for \"home battery\"");
        assert!(matches!(obs.refs[1].name, Cow::Borrowed(_)));
        assert_eq!(obs.refs[1].name, "Review: Northwind H2 home battery");
        assert_eq!(obs.refs[2].name, "It's: here");
        assert_eq!(obs.chunks[2], "\"The drop,\" said é😀");
    }

    #[test]
    fn diff_lines() {
        let (obs, stats) = tree(
            "- <changed> generic [active] [ref=e1]:\n  - ref=e2 [unchanged]\n  - button \"Button 2\" [ref=e3]\n- <changed> generic:",
        );
        assert!(stats.diff);
        assert_eq!(ids(&obs), ["e1", "e2", "e3"]);
        assert_eq!(obs.refs[1].role, "");
        assert_eq!(obs.refs[2].role, "button");
    }

    #[test]
    fn crlf_and_non_ascii() {
        let (obs, _) = tree("- definition [ref=e11]: \"-20 to 50 °C\"\r\n- heading \"This site can’t be reached\" [level=1] [ref=e7]\r\n");
        assert_eq!(ids(&obs), ["e11", "e7"]);
        assert_eq!(chunks(&obs), ["-20 to 50 °C", "This site can’t be reached"]);
    }

    #[test]
    fn regex_like_names() {
        let (obs, _) = tree("- link / [ref=e5]\n- link /a/b/ [ref=e6]:");
        assert_eq!(ids(&obs), ["e5", "e6"]);
        assert_eq!(obs.refs[0].name, "/");
        assert_eq!(obs.refs[1].name, "/a/b/");
    }

    #[test]
    fn malformed_lines_are_skipped() {
        for line in [
            "",
            "-",
            "- ",
            "- [",
            "- \"",
            "- '",
            "- 'x",
            "- a \"",
            "- a \\",
            "- a [ref=",
            "- ref=",
            "- ref=e1",
            "- ref=e1 [unch",
            "- a \"\\u12",
            "- a \"\\ud800\\u",
            "- é [ref=e1]",
        ] {
            let (obs, _) = tree(line);
            assert!(obs.refs.is_empty(), "{line:?}");
        }
        assert_eq!(unescape("\\ud800x"), "\u{FFFD}x");
        assert_eq!(unescape("\\u+041"), "\u{FFFD}+041");
        assert_eq!(unescape("a\\"), "a\\");
    }

    #[test]
    fn lines_offsets() {
        let l: Vec<_> = lines("a\r\nbc\n\nd").collect();
        assert_eq!(l.len(), 4);
        assert_eq!((l[1].start, l[1].next, l[1].text), (3, 6, "bc"));
        assert_eq!(l[0].text, "a");
        assert_eq!(l[3].next, 8);
    }
}
