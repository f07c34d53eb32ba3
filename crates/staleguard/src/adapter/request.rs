//! A request body read by one of the wire-format readers: the neutral transcript, and for
//! every result where its content sits in the body. Writing is the same for every format:
//! the original bytes are copied and only edited contents are spliced in.

use serde_json::value::RawValue;

use super::content::{self, Content, Shape, Style};
use super::lenient::List;
use crate::projection::Edit;
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
#[derive(Debug, Default, Clone, Copy)]
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
}

/// A content block that a `cache_control` breakpoint can be added to: where its object
/// ends in the body, and whether it has one already.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockEnd {
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
    /// goes; `None` for other items and blocks that may not carry one.
    blocks: Vec<Option<BlockEnd>>,
    /// `cache_control` breakpoints the body has (Anthropic: tools, system, content blocks).
    pub(crate) breakpoints: usize,
    /// Images that belong to a result but sit outside its content value (Gemini: a
    /// response's `parts`, and image parts after it): `(item, start, end, replacement)`,
    /// written only when that result is replaced.
    images: Vec<(usize, usize, usize, &'static str)>,
    /// What the body says about its own format.
    pub hints: Hints,
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
const BREAKPOINT: &str = r#","cache_control":{"type":"ephemeral"}"#;

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
        }
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
        let splices = self.splices(edits);
        let extra: usize = edits.iter().map(|e| e.text.len() + 64).sum();
        let mut out = String::with_capacity(self.body.len() + extra + BREAKPOINT.len());
        let mut insert = match breakpoint {
            Some(Breakpoint::Added(item)) => self.blocks.get(item).copied().flatten(),
            _ => None,
        };
        let mut at = 0;
        for (start, end, text) in splices {
            if start < at {
                continue;
            }
            self.copy_until(&mut out, &mut at, start, &mut insert);
            out.push_str(&text);
            at = end;
        }
        self.copy_until(&mut out, &mut at, self.body.len(), &mut insert);
        out
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
    fn copy_until(
        &self,
        out: &mut String,
        at: &mut usize,
        to: usize,
        insert: &mut Option<BlockEnd>,
    ) {
        if let Some(block) = insert.filter(|b| (*at..to).contains(&b.close)) {
            out.push_str(&self.body[*at..block.close]);
            out.push_str(BREAKPOINT);
            *at = block.close;
            *insert = None;
        }
        out.push_str(&self.body[*at..to]);
        *at = to;
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
        let texts: Vec<&str> = group.iter().map(|e| e.text.as_str()).collect();
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
            .fold(self.body.len(), |len, (start, end, text)| {
                len - (end - start) + text.len()
            })
    }
}
