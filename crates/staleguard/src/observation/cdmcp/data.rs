//! Chrome DevTools MCP's opt-in data formats. Behind `--experimentalStructuredContent` a
//! result also carries `structuredContent`, whose `snapshot` is the page tree as JSON (some
//! clients forward that JSON to the model instead of the text); behind
//! `--experimentalDataFormat=toon` the tree under `## Latest page snapshot` is TOON:
//!
//! ```text
//! {"message":"Successfully clicked on the element","snapshot":{"id":"7_0","role":"RootWebArea",
//!  "name":"Order placed","url":"http://x.test/done","children":[{"id":"7_1","role":"heading",
//!  "name":"Order placed","level":1},{"id":"7_5","role":"button","name":"Cancel this order"}]}}
//!
//! ## Latest page snapshot
//! id: 7_0
//! role: RootWebArea
//! name: Order placed
//! url: "http://x.test/done"
//! children[2]:
//!   - id: 7_1
//!     role: heading
//!     name: Order placed
//!     level: 1
//!   - id: 7_4
//!     role: form
//!     children[1]{id,role,name}:
//!       7_5,button,Cancel this order
//! ```
//!
//! Both decode to a [`Value`] (strings borrow from the text unless escaped), and [`printed`]
//! turns the tree into the nodes the text format prints for it (`uid=7_1 heading "Order
//! placed" level="1"`), so that the parent reads every form alike. The decoders are
//! strict: a text that is not exactly JSON, or not the TOON the server writes, is `None`.

use std::borrow::Cow;

use super::super::aria::lines;

/// Deepest nesting of objects and arrays read; deeper input is no snapshot.
const MAX_DEPTH: usize = 512;

/// A value of the JSON data model. Numbers keep their written form, which is how the text
/// format prints them (`level="1"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Value<'a> {
    Null,
    Bool(bool),
    Num(&'a str),
    Str(Cow<'a, str>),
    Arr(Vec<Value<'a>>),
    /// Fields in written order.
    Obj(Vec<(Cow<'a, str>, Value<'a>)>),
}

impl<'a> Value<'a> {
    /// The first field named `key` of an object.
    pub(super) fn get(&self, key: &str) -> Option<&Value<'a>> {
        match self {
            Value::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&Cow<'a, str>> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// `<digits>_<digits>`: how the server numbers nodes.
pub fn is_uid(id: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    id.split_once('_')
        .is_some_and(|(a, b)| digits(a) && digits(b))
}

// ------------------------------------------------------------------------------- JSON

/// `text` as one JSON value (surrounding whitespace allowed); `None` when it is not JSON.
pub(super) fn json(text: &str) -> Option<Value<'_>> {
    let mut p = Json { s: text, at: 0 };
    p.ws();
    let value = p.value(0)?;
    p.ws();
    (p.at == text.len()).then_some(value)
}

struct Json<'a> {
    s: &'a str,
    at: usize,
}

impl<'a> Json<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, b: u8) -> Option<()> {
        (self.peek() == Some(b)).then(|| self.at += 1)
    }

    fn value(&mut self, depth: usize) -> Option<Value<'a>> {
        match self.peek()? {
            b'{' | b'[' if depth >= MAX_DEPTH => None,
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => self.string().map(Value::Str),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn object(&mut self, depth: usize) -> Option<Value<'a>> {
        self.eat(b'{')?;
        let mut fields = Vec::new();
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(Value::Obj(fields));
        }
        loop {
            self.ws();
            let key = self.string()?;
            self.ws();
            self.eat(b':')?;
            self.ws();
            fields.push((key, self.value(depth + 1)?));
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(Value::Obj(fields));
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<Value<'a>> {
        self.eat(b'[')?;
        let mut items = Vec::new();
        self.ws();
        if self.eat(b']').is_some() {
            return Some(Value::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value(depth + 1)?);
            self.ws();
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(Value::Arr(items));
                }
                _ => return None,
            }
        }
    }

    fn literal(&mut self, word: &str, value: Value<'a>) -> Option<Value<'a>> {
        let rest = self.s.get(self.at..)?;
        rest.starts_with(word).then(|| {
            self.at += word.len();
            value
        })
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, as written.
    fn number(&mut self) -> Option<Value<'a>> {
        let start = self.at;
        let bytes = self.s.as_bytes();
        let digits = |at: &mut usize| {
            let from = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at > from
        };
        let mut at = start;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        if bytes.get(at) == Some(&b'0') {
            at += 1;
        } else if !digits(&mut at) {
            return None;
        }
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            if !digits(&mut at) {
                return None;
            }
        }
        if matches!(bytes.get(at), Some(b'e' | b'E')) {
            at += 1;
            if matches!(bytes.get(at), Some(b'+' | b'-')) {
                at += 1;
            }
            if !digits(&mut at) {
                return None;
            }
        }
        self.at = at;
        self.s.get(start..at).map(Value::Num)
    }

    /// A string literal; borrowed from the text unless it holds escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let rest = self.s.get(self.at..)?;
        let end = memchr::memchr2(b'"', b'\\', rest.as_bytes())?;
        let plain = rest.get(..end)?;
        if plain.bytes().any(|b| b < 0x20) {
            return None;
        }
        if rest.as_bytes().get(end) == Some(&b'"') {
            self.at += end + 1;
            return Some(Cow::Borrowed(plain));
        }
        // Escapes: decode into an owned string.
        let mut out = String::from(plain);
        let mut chars = rest.get(end..)?.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.at += end + i + 1;
                    return Some(Cow::Owned(out));
                }
                '\\' => {
                    let (_, e) = chars.next()?;
                    match e {
                        '"' | '\\' | '/' => out.push(e),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let hi = hex4(&mut chars)?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                // A high surrogate must be followed by `\u` and a low one.
                                let (_, b) = chars.next()?;
                                let (_, u) = chars.next()?;
                                let lo = hex4(&mut chars)?;
                                if b != '\\' || u != 'u' || !(0xDC00..0xE000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            out.push(char::from_u32(code)?);
                        }
                        _ => return None,
                    }
                }
                c if (c as u32) < 0x20 => return None,
                c => out.push(c),
            }
        }
        None
    }
}

/// Four hex digits of a `\u` escape.
fn hex4(chars: &mut std::str::CharIndices<'_>) -> Option<u32> {
    let mut code = 0;
    for _ in 0..4 {
        let (_, c) = chars.next()?;
        code = code * 16 + c.to_digit(16)?;
    }
    Some(code)
}

// ------------------------------------------------------------------------------- TOON

/// `text` as a TOON document whose root is an object, as `@toon-format/toon`'s `encode`
/// writes it with its defaults (two spaces per level); `None` when it is not that.
///
/// Read: `key: value`, `key:` with a nested object, `key: []`, and arrays `key[N]: a,b`
/// (primitives), `key[N]:` with `- ` items, `key[N]{f,g}:` with one row per item; a `|` or
/// tab after `N` names the delimiter. Counts must match. Keyed tables (`key[N:]`) and
/// nested field groups (`{f{a,b}}`), which the encoder writes only for object-valued
/// fields (a snapshot node has none), are not read.
pub(super) fn toon(text: &str) -> Option<Value<'_>> {
    let mut rows = Vec::new();
    for line in lines(text) {
        let content = line.text.trim_start_matches(' ');
        let content = content.trim_end_matches(' ');
        if content.is_empty() {
            continue;
        }
        let indent = line.text.len() - line.text.trim_start_matches(' ').len();
        if indent % 2 != 0 || content.starts_with('\t') {
            return None;
        }
        rows.push(Row {
            depth: indent / 2,
            text: content,
        });
    }
    let mut d = Toon { rows, at: 0 };
    if d.rows.is_empty() {
        return None;
    }
    let root = d.object(0, 0)?;
    (d.at == d.rows.len()).then_some(Value::Obj(root))
}

/// A non-blank line: its level and its content without indentation.
struct Row<'a> {
    depth: usize,
    text: &'a str,
}

struct Toon<'a> {
    rows: Vec<Row<'a>>,
    at: usize,
}

fn is_item(content: &str) -> bool {
    content == "-" || content.starts_with("- ")
}

impl<'a> Toon<'a> {
    /// The fields at `depth`, up to the first line above it.
    fn object(&mut self, depth: usize, nest: usize) -> Option<Vec<(Cow<'a, str>, Value<'a>)>> {
        let mut fields = Vec::new();
        while let Some(row) = self.rows.get(self.at) {
            if row.depth < depth {
                break;
            }
            if row.depth > depth || is_item(row.text) {
                return None;
            }
            let text = row.text;
            self.at += 1;
            fields.push(self.field(text, depth, nest)?);
        }
        Some(fields)
    }

    /// One field written at `depth`: what it nests sits at `depth + 1`.
    fn field(
        &mut self,
        content: &'a str,
        depth: usize,
        nest: usize,
    ) -> Option<(Cow<'a, str>, Value<'a>)> {
        let (key, rest) = key(content)?;
        if rest.starts_with('[') {
            return Some((key, self.array(rest, depth, nest)?));
        }
        let rest = rest.strip_prefix(':')?;
        if rest.is_empty() {
            if nest >= MAX_DEPTH {
                return None;
            }
            return Some((key, Value::Obj(self.object(depth + 1, nest + 1)?)));
        }
        let token = rest.strip_prefix(' ')?;
        if token.trim_matches(' ') == "[]" {
            return Some((key, Value::Arr(Vec::new())));
        }
        Some((key, primitive(token)?))
    }

    /// An array from its header `[N]...:` (after the key) written at `depth`.
    fn array(&mut self, header: &'a str, depth: usize, nest: usize) -> Option<Value<'a>> {
        if nest >= MAX_DEPTH {
            return None;
        }
        let close = header.find(']')?;
        let inside = header.get(1..close)?;
        let (count, delimiter) = match inside.as_bytes().last() {
            Some(b'|') => (inside.get(..inside.len() - 1)?, '|'),
            Some(b'\t') => (inside.get(..inside.len() - 1)?, '\t'),
            _ => (inside, ','),
        };
        let canonical = count == "0" || !count.starts_with('0');
        if count.is_empty() || !canonical || !count.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let count: usize = count.parse().ok()?;
        let mut rest = header.get(close + 1..)?;
        let mut fields = None;
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}')?;
            let names = split(group.get(..end)?, delimiter)?
                .into_iter()
                .map(|f| match key(f)? {
                    (name, "") => Some(name),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()?;
            fields = Some(names);
            rest = group.get(end + 1..)?;
        }
        let rest = rest.strip_prefix(':')?;
        if !rest.is_empty() {
            // Primitives inline.
            let values = rest.strip_prefix(' ')?;
            if fields.is_some() || count == 0 {
                return None;
            }
            let items = split(values, delimiter)?
                .into_iter()
                .map(primitive)
                .collect::<Option<Vec<_>>>()?;
            return (items.len() == count).then_some(Value::Arr(items));
        }
        let mut items = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            let row = self.rows.get(self.at).filter(|r| r.depth == depth + 1)?;
            let text = row.text;
            self.at += 1;
            let item = match &fields {
                Some(names) => {
                    let cells = split(text, delimiter)?;
                    if cells.len() != names.len() {
                        return None;
                    }
                    let row = names
                        .iter()
                        .zip(cells)
                        .map(|(name, cell)| Some((name.clone(), primitive(cell)?)))
                        .collect::<Option<Vec<_>>>()?;
                    Value::Obj(row)
                }
                None if is_item(text) => self.item(text, depth + 1, nest + 1)?,
                None => return None,
            };
            items.push(item);
        }
        Some(Value::Arr(items))
    }

    /// A list item `- ...` written at `depth`.
    fn item(&mut self, content: &'a str, depth: usize, nest: usize) -> Option<Value<'a>> {
        if content == "-" {
            return Some(Value::Obj(Vec::new()));
        }
        let rest = content.strip_prefix("- ")?;
        if rest.starts_with('[') {
            return self.array(rest, depth, nest);
        }
        if key(rest).is_some_and(|(_, after)| after.starts_with([':', '['])) {
            // An object: its first field on the item's line, as if one level deeper, where
            // the rest of its fields are.
            let first = self.field(rest, depth + 1, nest)?;
            let mut fields = vec![first];
            fields.extend(self.object(depth + 1, nest)?);
            return Some(Value::Obj(fields));
        }
        primitive(rest)
    }
}

/// A key at the start of `content`, quoted or not, and what follows it.
fn key(content: &str) -> Option<(Cow<'_, str>, &str)> {
    if content.starts_with('"') {
        return quoted(content);
    }
    let end = content.find([':', '[']).unwrap_or(content.len());
    let name = content.get(..end)?;
    let valid = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
    valid.then(|| (Cow::Borrowed(name), content.get(end..).unwrap_or("")))
}

/// A quoted string at the start of `s` (`"a \"b\""`), unescaped, and what follows it.
fn quoted(s: &str) -> Option<(Cow<'_, str>, &str)> {
    let body = s.strip_prefix('"')?;
    let mut escaped = false;
    let mut end = None;
    let mut iter = body.char_indices();
    while let Some((i, c)) = iter.next() {
        match c {
            '\\' => {
                escaped = true;
                iter.next()?;
            }
            '"' => {
                end = Some(i);
                break;
            }
            _ => {}
        }
    }
    let end = end?;
    let raw = body.get(..end)?;
    let rest = body.get(end + 1..)?;
    if !escaped {
        return Some((Cow::Borrowed(raw), rest));
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.char_indices();
    while let Some((_, c)) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()?.1 {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            'u' => {
                let code = hex4(&mut chars)?;
                out.push(char::from_u32(code)?);
            }
            _ => return None,
        }
    }
    Some((Cow::Owned(out), rest))
}

/// A primitive token: a quoted string, `true`, `false`, `null`, a number, or a bare string.
fn primitive(token: &str) -> Option<Value<'_>> {
    let token = token.trim_matches(' ');
    if token.starts_with('"') {
        let (s, rest) = quoted(token)?;
        return rest.is_empty().then_some(Value::Str(s));
    }
    Some(match token {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        "null" => Value::Null,
        t if is_number(t) => Value::Num(t),
        t if t.contains('"') => return None,
        t => Value::Str(Cow::Borrowed(t)),
    })
}

/// TOON's numeric literal: `-?(0|[1-9]\d*)(\.\d+)?(e[+-]?\d+)?`, any case of `e`.
fn is_number(t: &str) -> bool {
    let t = t.strip_prefix('-').unwrap_or(t);
    let (mantissa, exponent) = match t.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (t, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (int, frac) = match mantissa.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (mantissa, None),
    };
    let int_ok = int == "0" || (digits(int) && !int.starts_with('0'));
    let exp_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['+', '-']).unwrap_or(e)));
    int_ok && frac.is_none_or(digits) && exp_ok
}

/// Splits `s` at every `delimiter` outside quotes.
fn split(s: &str, delimiter: char) -> Option<Vec<&str>> {
    let mut cells = Vec::new();
    let (mut start, mut in_quotes) = (0, false);
    let mut iter = s.char_indices();
    while let Some((i, c)) = iter.next() {
        match c {
            '\\' if in_quotes => {
                iter.next()?;
            }
            '"' => in_quotes = !in_quotes,
            c if c == delimiter && !in_quotes => {
                cells.push(s.get(start..i)?);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if in_quotes {
        return None;
    }
    cells.push(s.get(start..)?);
    Some(cells)
}

// ------------------------------------------------------------------------ the printed tree

/// One node as the text format prints it: `uid=<uid>[ role][ "name"][ attributes]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Printed<'a> {
    /// Depth in the tree (the text format indents two spaces a level).
    pub depth: u32,
    pub uid: Cow<'a, str>,
    /// The printed role: none for a text node, `ignored` for role `none`.
    pub role: Option<Cow<'a, str>>,
    pub name: Option<Cow<'a, str>>,
    /// `key="value"` attributes and bare words (`None`), in printed order.
    pub attrs: Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>,
    /// False for a text child the text format leaves out because its parent's name already
    /// says it (`link "Home"` over the text `Home`). It keeps its uid, which the model sees
    /// in the data formats.
    pub shown: bool,
}

impl<'a> Printed<'a> {
    pub(super) fn attr(&self, key: &str) -> Option<&Cow<'a, str>> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_ref())
    }
}

/// The nodes of a snapshot tree (`structuredContent.snapshot`, or a decoded TOON tree), in
/// tree order, as the server's text formatter prints them (`SnapshotFormatter`):
/// `StaticText` prints no role and `none` prints `ignored`; `true` prints the bare key,
/// `false` nothing, a string or number `key="value"`; an option leaves out `selectable`
/// and a `value` equal to its name. `None` when a node is not an object with a uid `id`,
/// a string `role` and `name`, and an array of nodes as `children`.
pub(super) fn printed(root: Value<'_>) -> Option<Vec<Printed<'_>>> {
    let mut out = Vec::new();
    // Siblings still to print, with their depth and whether the text format hides them.
    let mut stack = vec![(0u32, false, vec![root].into_iter())];
    while let Some((depth, hidden, siblings)) = stack.last_mut() {
        let (depth, hidden) = (*depth, *hidden);
        let Some(node) = siblings.next() else {
            stack.pop();
            continue;
        };
        let Value::Obj(fields) = node else {
            return None;
        };
        let (node, children) = node_of(fields, depth, !hidden)?;
        let repeats = !hidden && repeats_name(node.name.as_deref(), &children);
        out.push(node);
        if !children.is_empty() {
            stack.push((
                depth.checked_add(1)?,
                hidden || repeats,
                children.into_iter(),
            ));
        }
    }
    Some(out)
}

/// A node's printed form and its children.
fn node_of<'a>(
    fields: Vec<(Cow<'a, str>, Value<'a>)>,
    depth: u32,
    shown: bool,
) -> Option<(Printed<'a>, Vec<Value<'a>>)> {
    let (mut uid, mut role, mut name, mut children) = (None, None, None, Vec::new());
    let mut rest = Vec::new();
    for (key, value) in fields {
        match (&*key, value) {
            ("id", Value::Str(id)) if is_uid(&id) => uid = Some(id),
            ("role", Value::Str(r)) => role = Some(r),
            ("name", Value::Str(n)) => name = Some(n),
            ("children", Value::Arr(items)) => children = items,
            ("id" | "role" | "name" | "children", _) => return None,
            (_, value) => rest.push((key, value)),
        }
    }
    let option = role.as_deref() == Some("option");
    let name = name.filter(|n| !n.is_empty());
    let mut attrs = Vec::with_capacity(rest.len());
    for (key, value) in rest {
        match value {
            Value::Bool(true) if option && key == "selectable" => {}
            Value::Bool(true) => attrs.push((key, None)),
            Value::Str(v) if option && key == "value" && Some(&v) == name.as_ref() => {}
            Value::Str(v) => attrs.push((key, Some(v))),
            Value::Num(n) => attrs.push((key, Some(Cow::Borrowed(n)))),
            Value::Bool(false) | Value::Null | Value::Arr(_) | Value::Obj(_) => {}
        }
    }
    let role = match role {
        Some(r) if r.is_empty() || r == "StaticText" => None,
        Some(r) if r == "none" => Some(Cow::Borrowed("ignored")),
        r => r,
    };
    let node = Printed {
        depth,
        uid: uid?,
        role,
        name,
        attrs,
        shown,
    };
    Some((node, children))
}

/// True when every child is a childless text node and together they say the parent's name
/// (whitespace aside): the text format prints the parent alone.
fn repeats_name(name: Option<&str>, children: &[Value<'_>]) -> bool {
    let Some(name) = name.filter(|n| !n.is_empty()) else {
        return false;
    };
    if children.is_empty() {
        return false;
    }
    let mut text = String::new();
    for child in children {
        let is_text = child
            .get("role")
            .and_then(Value::as_str)
            .is_some_and(|r| r == "StaticText");
        let leaf = match child.get("children") {
            None => true,
            Some(Value::Arr(items)) => items.is_empty(),
            Some(_) => false,
        };
        if !is_text || !leaf {
            return false;
        }
        if let Some(n) = child.get("name").and_then(Value::as_str) {
            text.push_str(n);
        }
    }
    let squeeze = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_whitespace() && *c != '\u{feff}')
            .collect()
    };
    squeeze(&text) == squeeze(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value<'_> {
        Value::Str(Cow::Borrowed(v))
    }

    #[test]
    fn json_values() {
        assert_eq!(json(" {} "), Some(Value::Obj(vec![])));
        assert_eq!(
            json(r#"{"a":[1,-2.5e3,true,false,null,"x"]}"#),
            Some(Value::Obj(vec![(
                Cow::Borrowed("a"),
                Value::Arr(vec![
                    Value::Num("1"),
                    Value::Num("-2.5e3"),
                    Value::Bool(true),
                    Value::Bool(false),
                    Value::Null,
                    s("x")
                ])
            )]))
        );
        let escaped = json(r#""a\"b\\c\u00e9\ud83d\ude00\n""#).unwrap();
        assert_eq!(escaped, Value::Str(Cow::Owned("a\"b\\cé😀\n".into())));
        let borrowed = json(r#""plain""#).unwrap();
        assert!(matches!(borrowed, Value::Str(Cow::Borrowed("plain"))));
        for bad in [
            "",
            "{",
            "}",
            "{\"a\"}",
            "{\"a\":}",
            "[1,]",
            "01",
            "1.",
            "-",
            "tru",
            "\"\\x\"",
            "\"\\ud83d\"",
            "\"a\nb\"",
            "{} {}",
            "{\"a\":1,}",
            "nul",
            "[1 2]",
        ] {
            assert_eq!(json(bad), None, "{bad:?}");
        }
        let deep = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(json(&deep), None);
        let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(json(&ok).is_some());
    }

    /// Deep input ends in `None`, not in a stack overflow (test threads have small stacks).
    #[test]
    fn deep_input_is_refused() {
        let objects: String = (0..MAX_DEPTH + 8)
            .map(|d| format!("{}a:\n", "  ".repeat(d)))
            .collect();
        assert_eq!(toon(&objects), None);
        let items: String = (0..MAX_DEPTH + 8)
            .map(|d| format!("{}- children[1]:\n", "  ".repeat(d)))
            .collect();
        assert_eq!(toon(&format!("children[1]:\n{items}")), None);
        // A tree as deep as the limit allows still reads.
        let levels = MAX_DEPTH / 2 - 2;
        let mut tree = String::from("{\"id\":\"1_0\",\"role\":\"RootWebArea\"");
        for i in 1..levels {
            tree += &format!(",\"children\":[{{\"id\":\"1_{i}\",\"role\":\"generic\"");
        }
        tree += &"}]".repeat(levels - 1);
        tree += "}";
        let nodes = printed(json(&tree).unwrap()).unwrap();
        assert_eq!(nodes.len(), levels);
        assert_eq!(nodes.last().map(|n| n.depth), Some(levels as u32 - 1));
    }

    #[test]
    fn toon_values() {
        let doc = "id: 1_0\nname: \"a: \\\"b\\\"\"\nn: 5\nq: \"5\"\nempty: []\ntags[2]: x,\"y,z\"\nnested:\n  k: v\nchildren[2]:\n  - id: 1_1\n    flag: true\n  - id: 1_2\n    children[2]{id,role,name}:\n      1_3,StaticText,Home\n      1_4,StaticText,\"A, B\"";
        let v = toon(doc).unwrap();
        assert_eq!(v.get("id"), Some(&s("1_0")));
        assert_eq!(
            v.get("name"),
            Some(&Value::Str(Cow::Owned("a: \"b\"".into())))
        );
        assert_eq!(v.get("n"), Some(&Value::Num("5")));
        assert_eq!(v.get("q"), Some(&s("5")));
        assert_eq!(v.get("empty"), Some(&Value::Arr(vec![])));
        assert_eq!(v.get("tags"), Some(&Value::Arr(vec![s("x"), s("y,z")])));
        assert_eq!(v.get("nested").and_then(|n| n.get("k")), Some(&s("v")));
        let Some(Value::Arr(children)) = v.get("children") else {
            panic!("children");
        };
        assert_eq!(children.len(), 2);
        assert_eq!(children[0].get("flag"), Some(&Value::Bool(true)));
        let Some(Value::Arr(rows)) = children[1].get("children") else {
            panic!("rows");
        };
        assert_eq!(rows[1].get("name"), Some(&s("A, B")));
        // Pipe delimiter.
        let piped = toon("c[2|]{a|b}:\n  1|x,y\n  2|z").unwrap();
        let Some(Value::Arr(rows)) = piped.get("c") else {
            panic!("piped");
        };
        assert_eq!(rows[0].get("b"), Some(&s("x,y")));
        for bad in [
            "",
            "- id: 1",
            "a: 1\n b: 2",
            "a: 1\n    b: 2",
            "c[2]:\n  - x",
            "c[1]:\n  - x\n  - y",
            "c[1]{a,b}:\n  1",
            "c[01]: x",
            "c[2]: x",
            "c[1:]{a}:\n  k: 1",
            "a: \"open",
            "a: \"x\" y",
            "1a: 1",
            "a:1",
            "uid=1_0 RootWebArea \"x\"",
            "\ta: 1",
        ] {
            assert_eq!(toon(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn printed_like_the_text_formatter() {
        let tree = json(
            r#"{"id":"1_9","role":"combobox","name":"Colour","expandable":true,"haspopup":"menu","value":"Red","children":[
                {"id":"1_10","role":"option","name":"Red","selectable":true,"selected":true,"value":"Red"},
                {"id":"1_11","role":"none","valuemax":20,"busy":false},
                {"id":"1_12","role":"link","name":"Home","children":[{"id":"1_13","role":"StaticText","name":" Home"}]}]}"#,
        )
        .unwrap();
        let nodes = printed(tree).unwrap();
        let line = |p: &Printed<'_>| {
            let mut l = format!("{}uid={}", "  ".repeat(p.depth as usize), p.uid);
            if let Some(r) = &p.role {
                l += &format!(" {r}");
            }
            if let Some(n) = &p.name {
                l += &format!(" \"{n}\"");
            }
            for (k, v) in &p.attrs {
                match v {
                    Some(v) => l += &format!(" {k}=\"{v}\""),
                    None => l += &format!(" {k}"),
                }
            }
            if !p.shown {
                l += " (hidden)";
            }
            l
        };
        let lines: Vec<String> = nodes.iter().map(line).collect();
        assert_eq!(
            lines,
            [
                "uid=1_9 combobox \"Colour\" expandable haspopup=\"menu\" value=\"Red\"",
                "  uid=1_10 option \"Red\" selected",
                "  uid=1_11 ignored valuemax=\"20\"",
                "  uid=1_12 link \"Home\"",
                "    uid=1_13 \" Home\" (hidden)",
            ]
        );
        for bad in [
            r#"{"id":"x","role":"button"}"#,
            r#"{"id":"1_0","role":1}"#,
            r#"{"id":"1_0","children":{}}"#,
            r#"{"id":"1_0","children":["1_1"]}"#,
            r#"{"role":"button"}"#,
            r#"["1_0"]"#,
        ] {
            assert_eq!(printed(json(bad).unwrap()), None, "{bad}");
        }
    }
}
