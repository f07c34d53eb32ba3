//! A request body read by one of the wire-format readers: the neutral transcript, and for
//! every result where its content sits in the body. Writing is the same for every format:
//! the original bytes are copied and only edited contents are spliced in.

use serde_json::value::RawValue;

use super::content::{self, Content, Shape, Style};
use super::format::RequestFormat;
use super::lenient::{is_json_space, List, Located, Seen};
use super::offers::{self, Offered};
use crate::transcript::Edit;
use crate::transcript::{Item, ToolResult, Transcript};

/// Where a result's content value sits in the body, and how it is written.
#[derive(Debug, Clone)]
pub(crate) struct Span {
    start: usize,
    end: usize,
    shape: Shape,
    style: Style,
}

/// What the body says about its own format.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Hints {
    /// A top-level `messages` array (Chat Completions, Anthropic Messages).
    pub has_messages: bool,
    /// A top-level `input` (Responses).
    pub has_input: bool,
    /// A top-level `contents` (Gemini); read as any body, only one whose items have
    /// `parts`.
    pub has_contents: bool,
    /// The Gemini request is wrapped as Gemini Code Assist sends it: `{"model", "project",
    /// "request": {"contents": ...}}`.
    pub wrapped_contents: bool,
    /// A top-level `system` or `anthropic_version` (Anthropic Messages).
    pub has_system: bool,
    /// `tool_use` or `tool_result` content blocks (Anthropic Messages).
    pub has_anthropic_blocks: bool,
    /// OpenAI Responses with `previous_response_id` or `conversation`, Gemini with
    /// `cachedContent`: earlier turns live on the server, and the request holds only the
    /// newest items.
    pub server_side_history: bool,
    /// The ways back the request offers: the MCP guard's `browser_history` tool (the guard
    /// stands between the model and the browser, SPEC 9, C5), the server's `browser_find`.
    /// `find` is only what the read met on its way (a system text, Anthropic's `tools`): ask
    /// [`WireRequest::offers_find`], which reads the rest when asked. It is a whole read's word
    /// only: a Chat Completions tail read sees neither the system messages before it nor a
    /// `tools` list, and the one user of `find`, a lean page, never resumes from a checkpoint.
    pub offers: Offered,
}

impl Hints {
    /// Both hints together: each says what one part of the body told.
    fn or(self, other: Hints) -> Hints {
        Hints {
            has_messages: self.has_messages || other.has_messages,
            has_input: self.has_input || other.has_input,
            has_contents: self.has_contents || other.has_contents,
            wrapped_contents: self.wrapped_contents || other.wrapped_contents,
            has_system: self.has_system || other.has_system,
            has_anthropic_blocks: self.has_anthropic_blocks || other.has_anthropic_blocks,
            offers: self.offers | other.offers,
            server_side_history: self.server_side_history || other.server_side_history,
        }
    }
}

/// A content block that a `cache_control` breakpoint can be added to: where its object
/// ends in the body, and whether it has one already.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockEnd {
    /// Offset of the block object's closing brace.
    close: usize,
    marked: bool,
}

/// A body, read.
pub struct WireRequest<'a> {
    body: &'a str,
    transcript: Transcript<'a>,
    spans: Vec<Option<Span>>,
    /// For each item read from a content block of the Anthropic format, where a breakpoint
    /// goes; `None` for other items and blocks that may not carry one. Public for the
    /// resume tests only.
    #[doc(hidden)]
    pub blocks: Vec<Option<BlockEnd>>,
    /// `cache_control` breakpoints the body has (Anthropic: tools, system, content blocks).
    /// Public for the resume tests only.
    #[doc(hidden)]
    pub breakpoints: usize,
    /// Images that belong to a result but sit outside its content value (Gemini: a
    /// response's `parts`, and image parts after it): `(item, start, end, replacement)`,
    /// written only when that result is replaced.
    images: Vec<(usize, usize, usize, &'static str)>,
    /// What the body says about its own format.
    pub hints: Hints,
    /// Where a later body that starts with this one's bytes may resume reading.
    resume: Resume,
}

/// What a reader records, at a few comparisons per message, so that a later body sharing a
/// prefix with this one is read from the end of that prefix on (`resume_at`).
#[derive(Default)]
struct Resume {
    /// The format read; `None` when the body cannot be resumed.
    format: Option<RequestFormat>,
    /// The index of the first message recorded (a resumed read starts past 0).
    base: usize,
    messages: Vec<MessageStart>,
    /// The known top-level keys of the envelope, before and after the array.
    keys: Vec<KeySeen>,
}

/// A message of the array, and the state of the read when it starts.
#[derive(Debug, Clone, Copy)]
struct MessageStart {
    /// Its first byte; `None` when the full read could not tell it (an element that is no
    /// object, an empty object, a first key with escapes).
    offset: Option<usize>,
    /// Its first transcript item.
    item: usize,
    /// `has_anthropic_blocks` of the messages before it.
    blocks_seen: bool,
    /// The breakpoints of the messages before it.
    breakpoints: usize,
}

/// A known top-level key of the envelope other than the array: where its value starts, and
/// what it tells. A resumed read takes what the keys before the array told from here, and
/// refuses a second one of them as the full read does.
#[derive(Debug, Clone)]
pub(crate) struct KeySeen {
    pub(super) name: &'static str,
    at: usize,
    hints: Hints,
    breakpoints: usize,
}

/// Where a later body that starts with the same bytes as this one can resume reading.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct ResumeAt {
    /// Byte offset of the first message read again: the first byte of that array element.
    pub offset: usize,
    /// Its index in the `messages` array.
    pub message: usize,
    /// The transcript item it starts at (items before it come from earlier messages).
    pub item: usize,
    pub(super) format: RequestFormat,
    /// The known top-level keys before the array.
    pub(super) keys: Vec<KeySeen>,
    /// `has_anthropic_blocks` of the messages before `message`.
    blocks_seen: bool,
    /// The breakpoints of the messages before `message` (keys' are in `keys`).
    breakpoints: usize,
}

impl ResumeAt {
    /// The same point in a body whose first `origin` bytes were cut off.
    pub(crate) fn moved(self, origin: usize) -> ResumeAt {
        ResumeAt {
            offset: self.offset + origin,
            ..self
        }
    }

    /// The same point, in the body's part that starts here.
    pub(crate) fn moved_to_start(&self) -> ResumeAt {
        ResumeAt {
            offset: 0,
            ..self.clone()
        }
    }

    /// Bytes it holds on the heap: the known keys before the array.
    pub(crate) fn keys_bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<KeySeen>()
    }
}

/// A written body and where a body offset landed in it.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct SplitWrite {
    /// The written body.
    pub body: String,
    /// Output offset of the body offset `mark`.
    pub mark: usize,
    /// Output offset where our own breakpoint was inserted, when that is before `mark`.
    pub breakpoint: Option<usize>,
}

/// The state of one write: the output, where the body is copied up to, and where the mark
/// and our breakpoint landed.
struct Writer {
    out: String,
    at: usize,
    mark: usize,
    mark_out: Option<usize>,
    breakpoint_out: Option<usize>,
}

impl Writer {
    /// Notes the mark when it lies in `at..to` of the body, which is about to be copied
    /// to the end of the output.
    fn note_mark(&mut self, to: usize) {
        if self.mark_out.is_none() && (self.at..to).contains(&self.mark) {
            self.mark_out = Some(self.out.len() + (self.mark - self.at));
        }
    }
}

/// The breakpoint of our own that an Anthropic request may carry (SPEC 9).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakpoint {
    /// Added after transcript item `.0`, the end of what stays frozen.
    Added(usize),
    /// The block at the end of what stays frozen has one already.
    AlreadyThere(usize),
    /// The request has the most breakpoints a provider takes (4) already.
    NoRoom,
}

impl Breakpoint {
    /// As reports and logs name it: `added`, `already_there`, `no_room`.
    pub fn as_str(self) -> &'static str {
        match self {
            Breakpoint::Added(_) => "added",
            Breakpoint::AlreadyThere(_) => "already_there",
            Breakpoint::NoRoom => "no_room",
        }
    }
}

/// The most `cache_control` breakpoints an Anthropic request may carry.
pub const MAX_BREAKPOINTS: usize = 4;

/// What a breakpoint of our own adds to a block object, before its closing brace.
pub(crate) const BREAKPOINT: &str = r#","cache_control":{"type":"ephemeral"}"#;

impl<'a> WireRequest<'a> {
    pub(crate) fn new(body: &'a str, hints: Hints) -> Self {
        WireRequest {
            body,
            transcript: Transcript::default(),
            spans: Vec::new(),
            blocks: Vec::new(),
            breakpoints: 0,
            images: Vec::new(),
            hints,
            resume: Resume::default(),
        }
    }

    /// A read of `body` from `at` on: the transcript items of the messages before it are
    /// `Other`, and hints and breakpoints are those the messages before it gave.
    pub(super) fn resumed(body: &'a str, at: &ResumeAt) -> Self {
        let hints = Hints {
            has_messages: true,
            has_anthropic_blocks: at.blocks_seen,
            ..Hints::default()
        };
        let mut request = WireRequest::new(body, hints);
        request.transcript.items.resize(at.item, Item::Other);
        request.spans.resize(at.item, None);
        request.breakpoints = at.breakpoints;
        request.resume.format = Some(at.format);
        request.resume.base = at.message;
        request
    }

    /// Puts back the model's text or a call's arguments at transcript item `item`, before
    /// the resume point of a request read from a checkpoint on (where the read left
    /// `Other`), as the assistant's text: what the analyses weigh words by, and nothing more.
    pub(crate) fn restore_model_text(&mut self, item: usize, text: &str) {
        if let Some(slot @ Item::Other) = self.transcript.items.get_mut(item) {
            *slot = Item::Text {
                role: crate::transcript::Role::Assistant,
                text: std::borrow::Cow::Owned(text.to_string()),
            };
        }
    }

    /// Lets later bodies resume a read of `format` (the body is an object).
    pub(crate) fn resumable(&mut self, format: RequestFormat) {
        if super::lenient::is_object(self.body) {
            self.resume.format = Some(format);
        }
    }

    /// Reads every element of the `messages` list with `read`, noting where each starts;
    /// odd elements become `Other`.
    pub(crate) fn read_messages<T>(
        &mut self,
        list: Option<List<Located<T>>>,
        mut read: impl FnMut(&mut Self, usize, T),
    ) {
        let Some(List::Items(items)) = list else {
            return;
        };
        self.resume.messages.reserve(items.len());
        for (index, item) in items.into_iter().enumerate() {
            let offset = item.as_ref().and_then(|m| self.object_at(m.key?));
            self.read_message(offset, index, item.map(|m| m.value), &mut read);
        }
    }

    /// Reads message `index`, which starts at `offset`.
    pub(super) fn read_message<T>(
        &mut self,
        offset: Option<usize>,
        index: usize,
        message: Option<T>,
        read: &mut impl FnMut(&mut Self, usize, T),
    ) {
        self.resume.messages.push(MessageStart {
            offset,
            item: self.next_item(),
            blocks_seen: self.hints.has_anthropic_blocks,
            breakpoints: self.breakpoints,
        });
        match message {
            Some(message) => read(self, index, message),
            None => self.push(Item::Other),
        }
    }

    /// The opening brace of the object whose first key's text is at address `key`.
    fn object_at(&self, key: usize) -> Option<usize> {
        let quote = key
            .checked_sub(self.body.as_ptr() as usize)?
            .checked_sub(1)?;
        let bytes = self.body.as_bytes();
        if bytes.get(quote) != Some(&b'"') {
            return None;
        }
        let open = bytes
            .get(..quote)?
            .iter()
            .rposition(|b| !is_json_space(*b))?;
        (bytes.get(open) == Some(&b'{')).then_some(open)
    }

    /// Notes the known top-level key `name`, when the body has it, and adds what it tells
    /// (`tells` its value, `None` for `null`) to the hints and breakpoints. Call it after
    /// the messages are read: they note the breakpoints before them.
    pub(crate) fn note_key(
        &mut self,
        name: &'static str,
        seen: Seen<'a>,
        tells: fn(&str, Option<&RawValue>) -> (Hints, usize),
    ) {
        let Some((at, _)) = seen.0.and_then(|raw| self.range_of(raw)) else {
            return;
        };
        let (hints, breakpoints) = tells(name, seen.value());
        self.add_key(KeySeen {
            name,
            at,
            hints,
            breakpoints,
        });
    }

    /// Whether the known top-level key `name` was noted.
    pub(super) fn has_key(&self, name: &str) -> bool {
        self.resume.keys.iter().any(|k| k.name == name)
    }

    /// Adds what a known top-level key tells.
    pub(super) fn add_key(&mut self, key: KeySeen) {
        self.hints = self.hints.or(key.hints);
        self.breakpoints += key.breakpoints;
        self.resume.keys.push(key);
    }

    /// The point where a body sharing this body's bytes up to the start of message
    /// `message` can resume reading; `None` when that message does not exist, its start is
    /// not known, or the format cannot resume (Responses, Gemini, or a body that was not
    /// read from a top-level `messages` array).
    #[doc(hidden)]
    pub fn resume_at(&self, message: usize) -> Option<ResumeAt> {
        let format = self.resume.format?;
        let start = self
            .resume
            .messages
            .get(message.checked_sub(self.resume.base)?)?;
        let offset = start.offset?;
        let keys = self.resume.keys.iter().filter(|k| k.at < offset);
        Some(ResumeAt {
            offset,
            message,
            item: start.item,
            format,
            keys: keys.cloned().collect(),
            blocks_seen: start.blocks_seen,
            breakpoints: start.breakpoints,
        })
    }

    /// Whether the request offers the server's `browser_find` (SPEC 2, "The way back"). The
    /// top-level tools are read for it here, only when a lean page asks: every Playwright MCP
    /// 0.0.83 body names the tool, and reading them on every body cost a second parse of it.
    pub(crate) fn offers_find(&self) -> bool {
        self.hints.offers.find || offers::top_level_find(self.body)
    }

    /// The neutral transcript of the body.
    pub fn transcript(&self) -> &Transcript<'a> {
        &self.transcript
    }

    /// The neutral transcript, without the body's spans.
    pub fn into_transcript(self) -> Transcript<'a> {
        self.transcript
    }

    /// Reads every element of a lenient list with `read`; odd elements become `Other`.
    pub(crate) fn read_list<T>(
        &mut self,
        list: Option<List<T>>,
        mut read: impl FnMut(&mut Self, usize, T),
    ) {
        if let Some(List::Items(items)) = list {
            for (index, item) in items.into_iter().enumerate() {
                match item {
                    Some(item) => read(self, index, item),
                    None => self.push(Item::Other),
                }
            }
        }
    }

    /// Notes where the block `raw`, just read as the newest item, ends: a breakpoint of our
    /// own may go there when it is `markable`.
    pub(crate) fn mark_block(&mut self, raw: &RawValue, markable: bool, marked: bool) {
        let json = raw.get();
        let start = (json.as_ptr() as usize).checked_sub(self.body.as_ptr() as usize);
        let close = start
            .and_then(|s| s.checked_add(json.trim_end().len().checked_sub(1)?))
            .filter(|&c| markable && self.body.as_bytes().get(c) == Some(&b'}'));
        let item = self.transcript.items.len().checked_sub(1);
        if let (Some(close), Some(item)) = (close, item) {
            self.blocks.resize(item + 1, None);
            self.blocks[item] = Some(BlockEnd { close, marked });
        }
    }

    /// The breakpoint of our own for a request whose frozen content ends before transcript
    /// item `frozen`: on the nearest block before it that may carry one.
    pub fn breakpoint_before(&self, frozen: usize) -> Option<Breakpoint> {
        let item = (0..frozen.min(self.blocks.len()))
            .rev()
            .find(|&i| self.blocks.get(i).copied().flatten().is_some())?;
        let block = self.blocks.get(item).copied().flatten()?;
        Some(if block.marked {
            Breakpoint::AlreadyThere(item)
        } else if self.breakpoints >= MAX_BREAKPOINTS {
            Breakpoint::NoRoom
        } else {
            Breakpoint::Added(item)
        })
    }

    /// Adds an item that is not edited.
    pub(crate) fn push(&mut self, item: Item<'a>) {
        self.transcript.items.push(item);
        self.spans.push(None);
    }

    /// The newest item when it is a result: a reader may set its text to the tool's own.
    pub(crate) fn last_result(&mut self) -> Option<&mut ToolResult<'a>> {
        match self.transcript.items.last_mut() {
            Some(Item::Result(result)) => Some(result),
            _ => None,
        }
    }

    /// Counts `count` images of the result at transcript item `item` that sit outside its
    /// content value, at bytes `start..end` of the body, to be replaced by `replacement` when
    /// the result is (a collapsed observation keeps no image, SPEC 2). No-op unless `item` is
    /// a result and the range lies in the body.
    pub(crate) fn images_of(
        &mut self,
        item: usize,
        (start, end): (usize, usize),
        replacement: &'static str,
        count: usize,
    ) {
        if start > end || end > self.body.len() {
            return;
        }
        let Some(Item::Result(result)) = self.transcript.items.get_mut(item) else {
            return;
        };
        result.images += count;
        self.images.push((item, start, end, replacement));
    }

    /// The index the next item will have.
    pub(crate) fn next_item(&self) -> usize {
        self.transcript.items.len()
    }

    /// Where `raw`, which borrows from the body, lies in it.
    pub(crate) fn range_of(&self, raw: &RawValue) -> Option<(usize, usize)> {
        let json = raw.get();
        let start = (json.as_ptr() as usize).checked_sub(self.body.as_ptr() as usize)?;
        let end = start.checked_add(json.len())?;
        (end <= self.body.len()).then_some((start, end))
    }

    /// Adds the tool result of message `index` whose content value is `raw` (text parts of
    /// type `text_type`); a result whose content cannot be read is kept as `Other`.
    pub(crate) fn push_result(
        &mut self,
        index: usize,
        call_id: Option<std::borrow::Cow<'a, str>>,
        raw: Option<&'a RawValue>,
        text_type: &'static str,
        is_error: bool,
    ) {
        let Some((raw, content)) = raw.and_then(|raw| Some((raw, content::read(raw, text_type)?)))
        else {
            return self.push(Item::Other);
        };
        let span = self.span_of(raw, &content);
        let result = ToolResult {
            call_id,
            text: content.text,
            is_error,
            images: content.images,
            appendix: content.appendix,
            message: index,
        };
        self.transcript.items.push(Item::Result(result));
        self.spans.push(span);
    }

    /// The byte range of `raw` in the body. Raw values borrow from the body, so this is
    /// pointer arithmetic on one allocation, checked anyway.
    fn span_of(&self, raw: &RawValue, content: &Content<'_>) -> Option<Span> {
        let start = (raw.get().as_ptr() as usize).checked_sub(self.body.as_ptr() as usize)?;
        let end = start.checked_add(raw.get().len())?;
        (end <= self.body.len()).then(|| Span {
            start,
            end,
            shape: content.shape,
            style: content.style.clone(),
        })
    }

    /// The body with each edit applied; all other bytes are copied. Appends to one result
    /// become parts of their own, in edit order.
    pub fn write(&self, edits: &[Edit]) -> String {
        self.write_with(edits, None)
    }

    /// [`write`](Self::write), with a `cache_control` breakpoint of our own added where
    /// `breakpoint` says.
    pub fn write_with(&self, edits: &[Edit], breakpoint: Option<Breakpoint>) -> String {
        self.write_from("", 0, edits, breakpoint, 0).body
    }

    /// Writes the body from byte `from` on, after `prefix` (the written form of every byte
    /// before `from`): only edits of contents that start at or after `from` apply, and the
    /// breakpoint when its block closes at or after `from`. `mark` (at least `from`; less
    /// counts as `from`) is a body offset that should not be inside an edited content (one
    /// that is lands where that content's replacement starts); the answer says where it
    /// landed in the output, after our breakpoint when that goes right before it.
    #[doc(hidden)]
    pub fn write_from(
        &self,
        prefix: &str,
        from: usize,
        edits: &[Edit],
        breakpoint: Option<Breakpoint>,
        mark: usize,
    ) -> SplitWrite {
        let extra: usize = edits.iter().map(|e| e.text.len() + 64).sum();
        let rest = self.body.len().saturating_sub(from);
        let mut w = Writer {
            out: String::with_capacity(prefix.len() + rest + extra + BREAKPOINT.len()),
            at: from,
            mark: mark.max(from),
            mark_out: None,
            breakpoint_out: None,
        };
        w.out.push_str(prefix);
        // A block that closes before `from` is never copied here: its breakpoint is the
        // prefix's.
        let mut insert = match breakpoint {
            Some(Breakpoint::Added(item)) => self.blocks.get(item).copied().flatten(),
            _ => None,
        };
        for (start, end, text) in self.splices(edits) {
            // Contents before `from` are in the prefix; overlapping ones are never written.
            if start < w.at {
                continue;
            }
            self.copy_until(&mut w, start, &mut insert);
            if (start..end).contains(&w.mark) {
                w.mark_out.get_or_insert(w.out.len());
            }
            w.out.push_str(&text);
            w.at = end;
        }
        self.copy_until(&mut w, self.body.len(), &mut insert);
        let mark = w.mark_out.unwrap_or(w.out.len());
        SplitWrite {
            mark,
            breakpoint: w.breakpoint_out.filter(|&b| b < mark),
            body: w.out,
        }
    }

    /// What replaces which bytes, in body order: each edited content, and the images outside
    /// a replaced result's content.
    fn splices(&self, edits: &[Edit]) -> Vec<(usize, usize, std::borrow::Cow<'static, str>)> {
        let groups = self.by_span(edits);
        let mut splices = Vec::with_capacity(groups.len());
        let replaced: std::collections::HashSet<usize> = if self.images.is_empty() {
            Default::default()
        } else {
            edits.iter().filter(|e| !e.append).map(|e| e.item).collect()
        };
        for &(item, start, end, replacement) in &self.images {
            if replaced.contains(&item) {
                splices.push((start, end, std::borrow::Cow::Borrowed(replacement)));
            }
        }
        for (span, group) in groups {
            let text = self.content_json(span, &group);
            splices.push((span.start, span.end, std::borrow::Cow::Owned(text)));
        }
        if !self.images.is_empty() {
            splices.sort_by_key(|s| s.0);
        }
        splices
    }

    /// Copies the body from `at` up to `to`, with our breakpoint when its block closes in
    /// between.
    fn copy_until(&self, w: &mut Writer, to: usize, insert: &mut Option<BlockEnd>) {
        if let Some(block) = insert.filter(|b| (w.at..to).contains(&b.close)) {
            self.copy(w, block.close);
            w.breakpoint_out = Some(w.out.len());
            w.out.push_str(BREAKPOINT);
            *insert = None;
        }
        self.copy(w, to);
    }

    /// Copies the body from where the writer is up to `to`. Offsets come from the reader and
    /// the caller's `from`, which lie on character boundaries; one that does not copies
    /// nothing rather than panic.
    fn copy(&self, w: &mut Writer, to: usize) {
        w.note_mark(to);
        w.out.push_str(self.body.get(w.at..to).unwrap_or_default());
        w.at = to;
    }

    /// Edits grouped by the content they touch, in body order.
    fn by_span<'e>(&self, edits: &'e [Edit]) -> Vec<(&Span, Vec<&'e Edit>)> {
        let mut groups: Vec<(&Span, Vec<&Edit>)> = Vec::new();
        // A request collapses thousands of results: find each one's group by its start.
        let mut group_of: std::collections::HashMap<usize, usize> = Default::default();
        for e in edits {
            let Some(span) = self.spans.get(e.item).and_then(Option::as_ref) else {
                continue;
            };
            match group_of.get(&span.start) {
                Some(&g) => groups[g].1.push(e),
                None => {
                    group_of.insert(span.start, groups.len());
                    groups.push((span, vec![e]));
                }
            }
        }
        groups.sort_by_key(|(span, _)| span.start);
        groups
    }

    /// A replacement wins over appends to the same content.
    fn content_json(&self, span: &Span, group: &[&Edit]) -> String {
        if let Some(replace) = group.iter().find(|e| !e.append) {
            return content::write(span.shape, &span.style, &replace.text);
        }
        let texts: Vec<&str> = group.iter().map(|e| &*e.text).collect();
        content::append(
            span.shape,
            &span.style,
            &self.body[span.start..span.end],
            &texts,
        )
    }

    /// The length [`write`](Self::write) would give, without writing.
    pub fn written_len(&self, edits: &[Edit]) -> usize {
        self.splices(edits)
            .into_iter()
            // Splices never overlap; saturating, so that a bug there gives a wrong length
            // (a budget's estimate), never a panic.
            .fold(self.body.len(), |len, (start, end, text)| {
                len.saturating_sub(end.saturating_sub(start)) + text.len()
            })
    }
}
