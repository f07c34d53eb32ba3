//! The lean form written out: kept lines as they are, each folded run as its start and a
//! marker that says how to read it back.

use super::follow_ups::FoldedBlock;

use crate::observation::aria::is_control_role;
use crate::projection::Folded;
use crate::texts::{self, PageLines};

use super::keep::{blocks, page_words, Keep};
use super::lines::{has_words, Line};

/// A folded block is kept for follow-up quotes up to this many bytes (the quotes' own
/// limit is the config's, at most this).
pub(super) const QUOTE_MAX_BYTES: usize = 8 * 1024;

/// A page's lean form and what it folded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lean {
    pub(crate) text: String,
    pub(crate) folded: Folded,
    /// The prose blocks it folded, for the questions asked while it is live.
    pub(super) blocks: Vec<FoldedBlock>,
}

/// How the model reads a folded part back.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ReadBack<'a> {
    /// The guard's `browser_history`, by the observation's ID.
    History(&'a str),
    /// The server's `browser_find`, a search in the live page.
    Find,
    /// A snapshot again, which sends the unchanged page whole (SPEC 2, "Ask again, get it
    /// whole"): the way back every request offers.
    SnapshotAgain,
}

/// A run of foldable lines under this many bytes is kept as it is: its marker would cost
/// about as much as it saves.
pub(super) const FOLD_MIN_BYTES: usize = 300;

/// The start a folded run keeps: its first sentence, up to this many bytes.
pub(super) const START_MAX_BYTES: usize = 100;

/// Writes the lean form: kept lines as they are, each folded run as its start and a marker.
pub(super) fn render(lines: &[Line<'_>], keep: &Keep, read_back: ReadBack<'_>) -> Lean {
    let mut shown: Vec<Shown> = (0..lines.len())
        .map(|i| match keep.echo[i] && !keep.hard[i] {
            true => Shown::Hidden,
            false => Shown::Line,
        })
        .collect();
    let mut folded = Folded::default();
    let mut i = 0;
    while i < lines.len() {
        if keep.hard[i] {
            i += 1;
            continue;
        }
        let end = (i..lines.len())
            .find(|&j| keep.hard[j])
            .unwrap_or(lines.len());
        let run = Run {
            at: PageLines {
                first: i + 1,
                last: end,
            },
            lines: &lines[i..end],
            soft: &keep.soft[i..end],
            echo: &keep.echo[i..end],
        };
        run.fold(&mut shown[i..end], read_back, &mut folded);
        i = end;
    }
    let shift = shifts(lines, &shown);
    let mut text = String::new();
    for ((line, shown), shift) in lines.iter().zip(shown).zip(shift) {
        match shown {
            Shown::Line if is_control_role(line.role().unwrap_or("")) => {
                // The role says it is clickable: the cursor hint says nothing more.
                let bare = unindent(line.text, shift);
                text.push_str(&bare.replacen(" [cursor=pointer]", "", 1));
            }
            Shown::Line => text.push_str(unindent(line.text, shift)),
            Shown::Hidden => {}
            Shown::Marker(head, marker) => {
                if let Some(head) = head {
                    text.push_str(unindent(&head, shift));
                }
                text.push_str(&" ".repeat(line.indent.saturating_sub(shift)));
                text.push_str(&marker);
                text.push('\n');
            }
        }
    }
    Lean {
        text,
        folded,
        blocks: Vec::new(),
    }
}

/// The prose blocks the lean form does not show, as the page reads them.
pub(super) fn folded_blocks(lines: &[Line<'_>], keep: &Keep) -> Vec<FoldedBlock> {
    blocks(lines)
        .into_iter()
        .filter(|&(first, _)| !keep.hard[first])
        .filter_map(|(first, end)| {
            let words: Vec<String> = lines[first..end].iter().filter_map(shown_text).collect();
            FoldedBlock::of(words.join(" "), QUOTE_MAX_BYTES)
        })
        .collect()
}

/// The text a line shows a reader: a node's name or its value, unquoted; nothing for
/// properties and bare containers.
pub(super) fn shown_text(line: &Line<'_>) -> Option<String> {
    line.role()?;
    let words = page_words(line);
    let words = words.trim().trim_end_matches(':');
    let text = match words.strip_prefix(": ") {
        Some(value) => value,
        None if words.starts_with('"') => words,
        None => return None,
    };
    let text = crate::observation::aria::unquote(text.trim());
    (!text.trim().is_empty()).then(|| text.trim().to_string())
}

/// How a line of the page is written in its lean form.
#[derive(Clone)]
pub(super) enum Shown {
    Line,
    Hidden,
    /// Its first sentence (when it has words) and the run's marker after it.
    Marker(Option<String>, String),
}

/// Spaces each line moves left: the indent steps of the items above it that are hidden, so
/// what is shown nests under what is shown.
pub(super) fn shifts(lines: &[Line<'_>], shown: &[Shown]) -> Vec<usize> {
    let mut shift = vec![0; lines.len()];
    for i in 0..lines.len() {
        if let Some(p) = lines[i].parent {
            let step = match shown[p] {
                Shown::Hidden => lines[i].indent.saturating_sub(lines[p].indent),
                _ => 0,
            };
            shift[i] = shift[p] + step;
        }
    }
    shift
}

/// `line` without `shift` of its leading spaces.
pub(super) fn unindent(line: &str, shift: usize) -> &str {
    let spaces = line.len() - line.trim_start_matches(' ').len();
    &line[shift.min(spaces)..]
}

/// A run of lines between hard-kept ones, with which of them are kept softly.
pub(super) struct Run<'r, 't> {
    /// Where it stands in the page's text.
    at: PageLines,
    lines: &'r [Line<'t>],
    soft: &'r [bool],
    echo: &'r [bool],
}

impl Run<'_, '_> {
    /// Leaves a small run whole; folds a larger one to its kept lines, its start and a
    /// marker after the start.
    fn fold(&self, shown: &mut [Shown], read_back: ReadBack<'_>, folded: &mut Folded) {
        let folds = |j: usize| !self.soft[j] && !self.echo[j];
        let foldable = || {
            (0..self.lines.len())
                .filter(|&j| folds(j))
                .map(|j| &self.lines[j])
        };
        let bytes: usize = foldable().map(|l| l.text.len()).sum();
        if bytes < FOLD_MIN_BYTES {
            return;
        }
        let start = (0..self.lines.len()).find(|&j| {
            let line = &self.lines[j];
            folds(j) && line.role().is_some() && has_words(line.body())
        });
        let head = start.map(|s| first_sentence(self.lines[s].text));
        let head_bytes = start
            .zip(head.as_ref())
            .map_or(0, |(s, h)| h.len().min(self.lines[s].text.len()));
        let hidden_lines = foldable().count() - usize::from(start.is_some());
        let hidden_bytes = bytes - head_bytes;
        for (j, slot) in shown.iter_mut().enumerate() {
            if !self.soft[j] {
                *slot = Shown::Hidden;
            }
        }
        let marker_at =
            start.unwrap_or_else(|| (0..self.lines.len()).find(|&j| folds(j)).unwrap_or(0));
        let marker = marker(
            hidden_lines,
            hidden_bytes,
            read_back,
            folded.runs == 0,
            self.at,
        );
        if let Some(slot) = shown.get_mut(marker_at) {
            *slot = Shown::Marker(head, marker);
        }
        folded.lines += hidden_lines;
        folded.bytes += hidden_bytes;
        folded.runs += 1;
    }
}

/// A run's marker: the first of a page says how to read folded parts back, the others how
/// much they fold.
pub(super) fn marker(
    lines: usize,
    bytes: usize,
    read_back: ReadBack<'_>,
    first: bool,
    at: PageLines,
) -> String {
    match read_back {
        ReadBack::History(id) if first => texts::lean_fold_history(lines, bytes, id, at),
        ReadBack::History(_) => texts::lean_fold_at(lines, bytes, at),
        _ if !first => texts::lean_fold(lines, bytes),
        ReadBack::Find => texts::lean_fold_find(lines, bytes),
        ReadBack::SnapshotAgain => texts::lean_fold_again(lines, bytes),
    }
}

/// `line` cut after its first sentence (or at [`START_MAX_BYTES`], on a word's end), with
/// a visible `…` and the quote it cut closed; short lines stay whole. Keeps its line break.
pub(super) fn first_sentence(line: &str) -> String {
    let bare = line.trim_end_matches(['\n', '\r']);
    if bare.len() <= START_MAX_BYTES {
        return line.to_string();
    }
    let indent = bare.len() - bare.trim_start().len();
    let window = floor_boundary(bare, START_MAX_BYTES.max(indent + 40));
    let sentence = bare[..window]
        .match_indices(['.', '?', '!'])
        .map(|(at, _)| at + 1)
        .find(|&at| at > indent + 24 && bare[at..].starts_with(' '));
    let cut = sentence.unwrap_or_else(|| {
        bare[..window]
            .rfind(' ')
            .filter(|&a| a > indent)
            .unwrap_or(window)
    });
    let mut head = bare[..cut].to_string();
    head.push('…');
    if open_quote(&head) {
        head.push('"');
    }
    head.push('\n');
    head
}

/// Whether `s` ends inside a double-quoted string.
pub(super) fn open_quote(s: &str) -> bool {
    let (mut inside, mut escaped) = (false, false);
    for c in s.chars() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' if inside => escaped = true,
            '"' => inside = !inside,
            _ => {}
        }
    }
    inside
}

pub(super) fn floor_boundary(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}
