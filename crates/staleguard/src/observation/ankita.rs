//! The seed system's text format (one tool named `browser`):
//!
//! ```text
//! Filled 3 fields.                                   <- action receipt (optional)
//! Current snapshot:
//! # Order a widget — https://shop.example/order
//! - [ref=1-0-21] textbox Name (type=text, value=Ada)
//! Visible page text (not action refs): Order a widget. ...
//! Observation: 00000000-0000-4000-8000-000000000002
//! [UNVERIFIED: ...]                                  <- footers (optional)
//! ```
//!
//! A page-text read-back (`Page text observation <id>` / `Source: ...`) has no
//! `Current snapshot:` line and is not an observation.

use std::borrow::Cow;

use super::aria::{is_ref_id, lines, Line};
use super::model::{Control, ElementRef, Observation, ObservationFormat, TreeKind};

/// Name of this format.
pub(crate) const NAME: &str = "ankita";

/// Lines that separate the action receipt from the tree. `Fresh snapshot:` follows an
/// error that re-captured the page.
const SEPARATORS: &[&str] = &["Current snapshot:", "Fresh snapshot:"];
const VISIBLE_TEXT: &str = "Visible page text (not action refs):";
const OBSERVATION: &str = "Observation:";
/// Bare attribute words that are states rather than part of a label.
const STATE_WORDS: &[&str] = &[
    "checked", "disabled", "expanded", "selected", "required", "readonly", "pressed", "focused",
];

/// Detector for the seed system's text format.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Ankita;

impl ObservationFormat for Ankita {
    fn name(&self) -> &'static str {
        NAME
    }

    /// The text before `Current snapshot:` reports steps the single `browser` call names
    /// only as a batch.
    fn action_in_call(&self) -> bool {
        false
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        let mut it = lines(text);
        let sep = it.find(|l| SEPARATORS.contains(&l.text.trim_end()))?;
        let header = it.find(|l| !l.text.trim().is_empty())?;
        let (title, url) = split_header(header.text.strip_prefix("# ")?);
        let mut obs = Observation::new(NAME, TreeKind::Full);
        obs.title = Some(Cow::Borrowed(title)).filter(|t| !t.is_empty());
        obs.url = url.map(Cow::Borrowed);
        obs.action = text
            .get(..sep.start)
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(Cow::Borrowed);
        body(text, it, &mut obs);
        Some(obs)
    }
}

/// `<title> — <url>`; the last em dash separates them, so a title may contain one.
fn split_header(header: &str) -> (&str, Option<&str>) {
    match header.rsplit_once(" — ") {
        Some((title, url)) if !url.trim().is_empty() => (title.trim(), Some(url.trim())),
        _ => (header.trim(), None),
    }
}

/// Reads ref lines, the visible page text (which may run over several lines) and the
/// observation ID. Lines after the ID (batch steps, verification footers) are not page data.
fn body<'a>(text: &'a str, it: impl Iterator<Item = Line<'a>>, obs: &mut Observation<'a>) {
    let mut visible: Option<(usize, usize)> = None;
    for line in it {
        let t = line.text;
        if let Some(rest) = t.strip_prefix(OBSERVATION) {
            obs.observation_id = Some(rest.trim())
                .filter(|d| !d.is_empty())
                .map(Cow::Borrowed);
            break;
        }
        if let Some(rest) = t.strip_prefix("- [ref=") {
            flush(text, &mut visible, obs);
            ref_line(rest, obs);
        } else if t.starts_with(VISIBLE_TEXT) {
            flush(text, &mut visible, obs);
            let start = line.start + VISIBLE_TEXT.len();
            visible = Some((start, line.start + t.len()));
        } else if t.starts_with("[verified") || t.starts_with("[UNVERIFIED") {
            flush(text, &mut visible, obs);
        } else if let Some((_, end)) = visible.as_mut() {
            *end = line.start + t.len();
        }
    }
    flush(text, &mut visible, obs);
}

fn flush<'a>(text: &'a str, visible: &mut Option<(usize, usize)>, obs: &mut Observation<'a>) {
    if let Some((a, b)) = visible.take() {
        let chunk = text.get(a..b).map(str::trim).unwrap_or("");
        if !chunk.is_empty() {
            obs.chunks.push(Cow::Borrowed(chunk));
        }
    }
}

/// `1-0-11] textbox Name (type=text, value=Ada)`: every listed element is actionable, so
/// each ref line is also a control.
fn ref_line<'a>(rest: &'a str, obs: &mut Observation<'a>) {
    let Some((id, body)) = rest.split_once(']') else {
        return;
    };
    if !is_ref_id(id) {
        return;
    }
    let body = body.trim();
    let (role, label) = body.split_once(' ').unwrap_or((body, ""));
    let (label, attrs) = split_attrs(label);
    let mut control = Control {
        role: Cow::Borrowed(role),
        name: Cow::Borrowed(label),
        value: None,
        states: Vec::new(),
    };
    for item in attrs.into_iter().flat_map(|a| a.split(", ")).map(str::trim) {
        match item.strip_prefix("value=") {
            Some(v) => control.value = Some(Cow::Borrowed(v)),
            None if !item.is_empty() => control.states.push(Cow::Borrowed(item)),
            None => {}
        }
    }
    control.states.sort();
    obs.refs.push(ElementRef {
        id: Cow::Borrowed(id),
        role: Cow::Borrowed(role),
        name: Cow::Borrowed(label),
    });
    obs.controls.push(control);
}

/// Splits a trailing `(key=value, ...)` group off a label. A group that does not look like
/// attributes stays in the label: `Subscribe (free)`.
fn split_attrs(label: &str) -> (&str, Option<&str>) {
    let Some(inner_end) = label.len().checked_sub(1).filter(|_| label.ends_with(')')) else {
        return (label, None);
    };
    let open = match label.rfind(" (") {
        Some(i) => i + 1,
        None if label.starts_with('(') => 0,
        None => return (label, None),
    };
    let inner = label.get(open + 1..inner_end).unwrap_or("");
    if inner.is_empty() || !inner.split(", ").all(is_attr) {
        return (label, None);
    }
    (label.get(..open).unwrap_or("").trim_end(), Some(inner))
}

fn is_attr(item: &str) -> bool {
    let item = item.trim();
    match item.split_once('=') {
        Some((key, _)) => {
            !key.is_empty()
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }
        None => STATE_WORDS.contains(&item),
    }
}

/// A chunk of a page-text read-back: the page text the browser returned for a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReadBack<'a> {
    /// The read-back's own observation ID.
    pub observation: &'a str,
    /// The `Source:` URL of the chunk.
    pub url: &'a str,
    /// The page text, as the browser returned it.
    pub text: &'a str,
}

/// The chunks of a page-text read-back: `Page text observation <id>`, then one or more
/// `Source: <url>; frame=...; range=a:b` lines, each followed by its text.
pub(crate) fn read_back(text: &str) -> Vec<ReadBack<'_>> {
    let mut lines = text.split('\n');
    let Some(observation) = lines
        .next()
        .and_then(|l| l.trim_end().strip_prefix("Page text observation "))
    else {
        return Vec::new();
    };
    let mut chunks = Vec::new();
    let mut current: Option<(&str, Vec<&str>)> = None;
    for line in lines {
        if let Some(source) = line.strip_prefix("Source: ") {
            chunks.extend(current.take());
            let url = source.split(';').next().unwrap_or("").trim();
            current = Some((url, Vec::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push(line);
        }
    }
    chunks.extend(current);
    chunks
        .into_iter()
        .filter_map(|(url, body)| {
            let first = body.first()?;
            let last = body.last()?;
            // The chunk is the span of the original text from its first to its last line.
            let base = text.as_ptr() as usize;
            let start = (first.as_ptr() as usize).checked_sub(base)?;
            let end = (last.as_ptr() as usize).checked_sub(base)? + last.len();
            let chunk = text.get(start..end)?.trim_end_matches(['\r', '\n']);
            (!chunk.trim().is_empty()).then_some(ReadBack {
                observation: observation.trim(),
                url,
                text: chunk,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// fixtures/ankita/order.openai.json, call_2.
    const FILLED: &str = "Filled 3 fields.
Current snapshot:
# Order a widget — https://shop.example/order
- [ref=1-0-21] textbox Name (type=text, value=Ada)
- [ref=1-0-22] spinbutton Quantity (type=number, value=2)
- [ref=1-0-23] combobox Colour (value=Blue)
- [ref=1-0-24] button Review order
Visible page text (not action refs): Order a widget. Price: $19.99 per widget.
Observation: 00000000-0000-4000-8000-000000000002
[UNVERIFIED: side effect needs a read-back check before claiming success. Do not claim success; run a read-back check or report the limitation.]";

    /// call_3: a partial batch; the failed step after the observation is not page data.
    const BATCH: &str = "1. click complete.
Current snapshot:
# Confirm order — https://shop.example/confirm
- [ref=1-0-01] button Place order
- [ref=1-0-02] link Edit order
Visible page text (not action refs): Confirm your order. Order total: $39.98 for 2 x Blue.
Observation: 00000000-0000-4000-8000-000000000003
2. Error: stale target 1-0-99. Batch stopped.
[UNVERIFIED: side effect needs a read-back check before claiming success. Do not claim success; run a read-back check or report the limitation.]";

    /// call_4: a snapshot without a receipt.
    const SNAPSHOT: &str = "Current snapshot:
# Confirm order — https://shop.example/confirm
- [ref=1-0-31] button Place order
- [ref=1-0-32] link Edit order
Visible page text (not action refs): Confirm your order. Order total: $39.98 for 2 x Blue.
Observation: 00000000-0000-4000-8000-000000000003";

    fn parse(text: &str) -> Option<Observation<'_>> {
        Ankita.parse(text)
    }

    #[test]
    fn filled_form() {
        let obs = parse(FILLED).unwrap();
        assert_eq!((obs.format, obs.kind), (NAME, TreeKind::Full));
        assert_eq!(obs.action.as_deref(), Some("Filled 3 fields."));
        assert_eq!(obs.title.as_deref(), Some("Order a widget"));
        assert_eq!(obs.url.as_deref(), Some("https://shop.example/order"));
        assert_eq!(
            obs.observation_id.as_deref(),
            Some("00000000-0000-4000-8000-000000000002")
        );
        let refs = obs.ref_triples();
        assert_eq!(
            refs,
            [
                ("1-0-21", "textbox", "Name"),
                ("1-0-22", "spinbutton", "Quantity"),
                ("1-0-23", "combobox", "Colour"),
                ("1-0-24", "button", "Review order"),
            ]
        );
        let c: Vec<_> = obs
            .controls
            .iter()
            .map(|c| (&*c.name, c.value.as_deref(), c.states.clone()))
            .collect();
        assert_eq!(
            c,
            [
                ("Name", Some("Ada"), vec![Cow::Borrowed("type=text")]),
                ("Quantity", Some("2"), vec!["type=number".into()]),
                ("Colour", Some("Blue"), vec![]),
                ("Review order", None, vec![]),
            ]
        );
        assert_eq!(obs.chunks, ["Order a widget. Price: $19.99 per widget."]);
        assert!(obs.tabs.is_empty());
        assert_eq!(obs.images, 0);
    }

    #[test]
    fn batch_and_plain_snapshot() {
        let obs = parse(BATCH).unwrap();
        assert_eq!(obs.action.as_deref(), Some("1. click complete."));
        assert_eq!(obs.refs.len(), 2);
        assert_eq!(
            obs.chunks,
            ["Confirm your order. Order total: $39.98 for 2 x Blue."]
        );
        let obs = parse(SNAPSHOT).unwrap();
        assert_eq!(obs.action, None);
        assert_eq!(obs.refs[0].id, "1-0-31");
        let crlf = SNAPSHOT.replace('\n', "\r\n");
        assert_eq!(parse(&crlf), Some(obs));
    }

    #[test]
    fn read_back_chunks() {
        let text = "Page text observation 00000000-0000-4000-8000-000000000005\nSource: https://shop.example/confirm; frame=main; range=0:52\nConfirm your order. Order total: $39.98 for 2 x Blue.\nSource: https://shop.example/faq; frame=f1; range=0:9\nShips in\n2 days.";
        let chunks = read_back(text);
        assert_eq!(chunks.len(), 2);
        assert_eq!(
            chunks[0].observation,
            "00000000-0000-4000-8000-000000000005"
        );
        assert_eq!(chunks[0].url, "https://shop.example/confirm");
        assert_eq!(
            chunks[0].text,
            "Confirm your order. Order total: $39.98 for 2 x Blue."
        );
        assert_eq!(
            (chunks[1].url, chunks[1].text),
            ("https://shop.example/faq", "Ships in\n2 days.")
        );
        assert!(read_back("Current snapshot:\nSource: x").is_empty());
        assert!(read_back("Page text observation x\nSource: u; range=0:0\n").is_empty());
    }

    #[test]
    fn not_an_observation() {
        let read_back = "Page text observation 00000000-0000-4000-8000-000000000005\nSource: https://shop.example/confirm; frame=main; range=0:52\nConfirm your order. Order total: $39.98 for 2 x Blue.";
        let notes = "notes.md\n- [ref=1-0-31] was the Place order button";
        let no_header = "Current snapshot:\n- [ref=1-0-31] button Place order";
        for text in [
            "",
            read_back,
            notes,
            no_header,
            "Current snapshot:",
            "Current snapshot:\n\n",
        ] {
            assert!(parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn hostile_lines() {
        let text = "Current snapshot:\n# Q&A — part 2 — https://x.test/a?b=c\n- [ref=9-9-1] button Subscribe (free)\n- [ref=bad ref] button X\n- [ref=9-9-2] checkbox Terms (checked, required)\n- [ref=9-9-3] textbox (type=email)\n- [ref=9-9-4]\nVisible page text (not action refs): It’s 20 °C,\nsee [ref=1-0-5] here.\n[verified: URL]\nObservation: ";
        let obs = parse(text).unwrap();
        assert_eq!(obs.title.as_deref(), Some("Q&A — part 2"));
        assert_eq!(obs.url.as_deref(), Some("https://x.test/a?b=c"));
        let refs = obs.ref_triples();
        assert_eq!(
            refs,
            [
                ("9-9-1", "button", "Subscribe (free)"),
                ("9-9-2", "checkbox", "Terms"),
                ("9-9-3", "textbox", ""),
                ("9-9-4", "", ""),
            ]
        );
        assert_eq!(obs.controls[1].states, ["checked", "required"]);
        assert_eq!(obs.controls[2].states, ["type=email"]);
        assert_eq!(obs.chunks, ["It’s 20 °C,\nsee [ref=1-0-5] here."]);
        assert_eq!(obs.observation_id, None);
        let no_url = parse("Current snapshot:\n# Just a title\n- [ref=1] link A").unwrap();
        assert_eq!(
            (no_url.title.as_deref(), no_url.url),
            (Some("Just a title"), None)
        );
    }

    #[test]
    fn snapshot() {
        insta::assert_debug_snapshot!(parse(FILLED));
    }
}
