//! Which lines a lean page keeps: the controls and the way to them, headings, what the page
//! says about the last action, the ends of long repetitions, and the prose that answers
//! the user's and the model's words.

use super::follow_ups::{MIN_SCORE, SHARE_OF_BEST};

use crate::evidence::{bm25, ranked, section_of, word_hashes, Words};
use crate::observation::roles::{FOLD_BLOCK_ROLES, LIST_ROLES, LIVE_ROLES};

use super::lines::{has_words, is_named, is_path, Kind, Line};

/// What prose is weighed against: the user's words, and the model's since the last of them.
pub(crate) struct Query<'q> {
    pub(crate) task: &'q Words,
    pub(crate) model: &'q Words,
    /// The page's URL: its fragment names the section the agent went to read.
    pub(crate) url: &'q str,
}

/// Bytes of prose kept for its words: what the rest leaves of [`TARGET_SHARE`] of the page,
/// at most [`BUDGET_SHARE`] of it and at least [`MIN_BUDGET`].
pub(super) const TARGET_SHARE: f64 = 0.28;

pub(super) const BUDGET_SHARE: f64 = 0.15;

pub(super) const MIN_BUDGET: usize = 4 * 1024;

/// A short block right after an answer is kept with it, up to this many bytes.
pub(super) const NEXT_MAX_BYTES: usize = 400;

/// A container with this many children of one role is a repetition: its first and last
/// [`REPEAT_ENDS`] children are kept whole.
pub(super) const REPEAT_MIN: usize = 12;

pub(super) const REPEAT_ENDS: usize = 2;

/// A repeated child kept at an end is a row or an item, not a section: at most this many
/// bytes.
pub(super) const REPEAT_MAX_BYTES: usize = 600;

/// How each line is kept: `hard` lines are kept and end a folded run; `soft` lines (the
/// controls and the path to them) are kept inside a run without ending it; `echo` lines
/// under a named control say again what its name says (and its `/url`), and are left out.
pub(super) struct Keep {
    pub(super) hard: Vec<bool>,
    pub(super) soft: Vec<bool>,
    pub(super) echo: Vec<bool>,
}

impl Keep {
    pub(super) fn of(lines: &[Line<'_>], query: &Query<'_>, page_bytes: usize) -> Keep {
        let n = lines.len();
        let mut keep = Keep {
            hard: vec![false; n],
            soft: vec![false; n],
            echo: vec![false; n],
        };
        for (i, line) in lines.iter().enumerate() {
            match line.role() {
                None if line.kind == Kind::Outside => keep.hard[i] = true,
                Some("heading") => keep.heading(lines, i),
                Some(role) if LIVE_ROLES.contains(&role) => keep.whole(lines, i),
                _ if line.actionable() => keep.control(lines, i),
                _ => {}
            }
        }
        for i in repetition_ends(lines) {
            keep.whole(lines, i);
        }
        keep.paths(lines);
        keep.wrappers(lines);
        // Prose gets what the page's controls leave of the target, within its bounds.
        let kept: usize = (0..n)
            .filter(|&i| keep.hard[i] || keep.soft[i])
            .map(|i| lines[i].text.len())
            .sum();
        let share = |s: f64| (page_bytes as f64 * s) as usize;
        let budget = share(TARGET_SHARE)
            .saturating_sub(kept)
            .clamp(MIN_BUDGET, share(BUDGET_SHARE).max(MIN_BUDGET));
        let skip: Vec<bool> = (0..n).map(|i| keep.echo[i] || keep.soft[i]).collect();
        for i in answers(lines, query, budget, &skip) {
            keep.whole(lines, i);
        }
        keep.paths(lines);
        keep.wrappers(lines);
        keep
    }

    /// Items that only wrap others (`- listitem [ref=e4]:`, `- code [ref=e9]:`) hold no
    /// page text: unless on a path or kept whole, they are left out, their children moved
    /// up in their place.
    fn wrappers(&mut self, lines: &[Line<'_>]) {
        for (i, line) in lines.iter().enumerate() {
            let wraps = line.end > i + 1 && line.role().is_some() && !has_words(line.body());
            self.echo[i] |= wraps && !self.hard[i] && !self.soft[i] && !line.actionable();
        }
    }

    /// A heading: its line, and the text under it when its line does not name it.
    fn heading(&mut self, lines: &[Line<'_>], i: usize) {
        if !is_named(&lines[i]) {
            return self.whole(lines, i);
        }
        self.hard[i] = true;
        let under = i + 1..lines[i].end;
        for (echo, line) in self.echo[under.clone()].iter_mut().zip(&lines[under]) {
            *echo |= !line.actionable();
        }
    }

    fn whole(&mut self, lines: &[Line<'_>], i: usize) {
        for h in &mut self.hard[i..lines[i].end] {
            *h = true;
        }
    }

    /// A control: its line, and its properties (but a link's `/url`: the model follows a
    /// link by its ref) and continuations.
    fn control(&mut self, lines: &[Line<'_>], i: usize) {
        self.soft[i] = true;
        // An unnamed control is named by the text inside it: all of it is kept.
        let named = is_named(&lines[i]);
        for (j, line) in lines.iter().enumerate().take(lines[i].end).skip(i + 1) {
            let own = !named || (line.parent == Some(i) && !matches!(line.kind, Kind::Item(_)));
            let url = line.body().starts_with("- /url:");
            self.soft[j] |= own && !url;
            self.echo[j] |= url || (named && !self.soft[j] && !line.actionable());
        }
    }

    /// The landmarks, tables and named nodes above a kept line are kept, softly: the path
    /// to it. Unnamed wrappers (`generic`, `listitem`, `paragraph`) fold with the prose.
    /// A table row is on the path to a control other than a link only: its name tells
    /// which item a button acts on, where a link's own name says where it goes.
    fn paths(&mut self, lines: &[Line<'_>]) {
        let needs_row = |l: &Line<'_>| l.actionable() && l.role() != Some("link");
        for rows in [true, false] {
            let mut walked = vec![false; lines.len()];
            for i in (0..lines.len()).rev() {
                let kept = self.hard[i] || self.soft[i];
                if !kept || needs_row(&lines[i]) != rows {
                    continue;
                }
                let mut up = lines[i].parent;
                while let Some(p) = up.filter(|&p| !walked[p]) {
                    walked[p] = true;
                    let role = lines[p].role();
                    self.soft[p] |= is_path(&lines[p]) && (rows || role != Some("row"));
                    up = lines[p].parent;
                }
            }
        }
    }
}

/// The prose blocks: innermost items of a block role, and items with no children that no
/// block holds. Each as (first line, end).
pub(super) fn blocks(lines: &[Line<'_>]) -> Vec<(usize, usize)> {
    let is_block = |i: usize| {
        lines[i]
            .role()
            .is_some_and(|r| FOLD_BLOCK_ROLES.contains(&r))
    };
    // Whether an item's subtree holds a block below it.
    let mut holds = vec![false; lines.len()];
    for i in (0..lines.len()).rev() {
        if let Some(p) = lines[i].parent {
            holds[p] |= holds[i] || is_block(i);
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = &lines[i];
        let leaf =
            line.role().is_some() && lines[i + 1..line.end].iter().all(|l| l.role().is_none());
        if (is_block(i) && !holds[i]) || (leaf && line.role() != Some("heading")) {
            out.push((i, line.end));
            i = line.end;
        } else {
            i += 1;
        }
    }
    out
}

/// The first line of every block that answers the query, best first within a byte budget.
pub(super) fn answers(
    lines: &[Line<'_>],
    query: &Query<'_>,
    budget: usize,
    skip: &[bool],
) -> Vec<usize> {
    let blocks = blocks(lines);
    // A block's words are those the lean form would not show anyway: a control's name is.
    let texts: Vec<String> = blocks
        .iter()
        .map(|&(a, b)| {
            let mut text = String::new();
            for (line, _) in lines[a..b].iter().zip(&skip[a..b]).filter(|(_, &s)| !s) {
                text.push_str(page_words(line).trim());
                text.push(' ');
            }
            text
        })
        .collect();
    let words: Vec<Box<[u64]>> = texts.iter().map(|t| word_hashes(t)).collect();
    let docs: Vec<&[u64]> = words.iter().map(|w| &**w).collect();
    // The user's words weigh more than the model's, numbers more than plain words.
    let mut scores = bm25(&docs, &[(query.task, 1.0, 2.0), (query.model, 0.6, 1.5)]);
    // The section the URL points at is what the agent went there to read.
    let section = section_of(query.url, texts.iter().map(|t| t.trim()));
    let best = scores.iter().copied().fold(0.0, f64::max);
    let end = section.end.min(scores.len());
    for score in scores
        .get_mut(section.start.min(end)..end)
        .unwrap_or_default()
    {
        *score = score.max(best);
    }
    let bytes = |b: usize| -> usize {
        let (first, end) = blocks[b];
        lines[first..end].iter().map(|l| l.text.len()).sum()
    };
    let mut spent = 0;
    let mut out = Vec::new();
    for b in ranked(&scores, MIN_SCORE, SHARE_OF_BEST) {
        if spent > 0 && spent + bytes(b) > budget {
            continue;
        }
        spent += bytes(b);
        out.push(blocks[b].0);
        // An answer's example or its last words often follow it in a short block.
        if let Some(next) = blocks.get(b + 1).filter(|_| bytes(b + 1) <= NEXT_MAX_BYTES) {
            out.push(next.0);
        }
    }
    out
}

/// The page's words on a line: its name and text, not its role, ref or other attributes.
pub(super) fn page_words(line: &Line<'_>) -> String {
    let rest = line.after_role();
    let mut out = String::with_capacity(rest.len());
    let mut at = 0;
    while let Some(open) = rest[at..].find(" [").map(|o| at + o) {
        out.push_str(&rest[at..open]);
        let attr = &rest[open + 2..];
        let name_end = attr
            .find(|c: char| !(c.is_ascii_lowercase() || c == '-'))
            .unwrap_or(0);
        match attr[name_end..].find(']') {
            Some(close)
                if name_end > 0 && matches!(attr.as_bytes().get(name_end), Some(b'=' | b']')) =>
            {
                at = open + 2 + name_end + close + 1;
            }
            _ => {
                out.push_str(" [");
                at = open + 2;
            }
        }
    }
    out.push_str(&rest[at..]);
    out
}

/// The first line of the first and last children of every container whose children repeat
/// one role many times (a catalog's rows, a long list).
pub(super) fn repetition_ends(lines: &[Line<'_>]) -> Vec<usize> {
    let mut children: std::collections::HashMap<usize, Vec<usize>> = Default::default();
    for (i, line) in lines.iter().enumerate() {
        if let (Some(p), Some(_)) = (line.parent, line.role()) {
            children.entry(p).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    for (&parent, kids) in &children {
        if !lines[parent]
            .role()
            .is_some_and(|r| LIST_ROLES.contains(&r))
        {
            continue;
        }
        let mut by_role: std::collections::HashMap<&str, Vec<usize>> = Default::default();
        for &k in kids {
            by_role
                .entry(lines[k].role().unwrap_or(""))
                .or_default()
                .push(k);
        }
        let small = |&&k: &&usize| {
            let bytes: usize = lines[k..lines[k].end].iter().map(|l| l.text.len()).sum();
            bytes <= REPEAT_MAX_BYTES
        };
        for same in by_role.values().filter(|s| s.len() >= REPEAT_MIN) {
            out.extend(same.iter().take(REPEAT_ENDS).filter(small));
            out.extend(same.iter().rev().take(REPEAT_ENDS).filter(small));
        }
    }
    out
}
