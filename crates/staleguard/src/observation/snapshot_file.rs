//! A page tree read back from a file (SPEC 1). Playwright MCP 0.0.69 on writes the page to
//! `.playwright-mcp/page-<stamp>.yml` and links it; agents read it with their own tools:
//! Claude Code's `Read` (`     1→- generic [ref=e1]:` or `     1\t...`), `cat`, Gemini CLI's
//! `read_file`, opencode's `read` (`00001| ...`, `1: ...`, inside `<file>` tags).
//!
//! The text is a page only when it is a tree and nothing else: one run of aria lines
//! (every line `- ...` at an even indent that grows by at most one level a line), with at
//! least one ref in its place, and around it only what file tools wrap a file in (tags,
//! fences, notes in parentheses, a truncation notice, a trailing `<system-reminder>`).
//! Numbered lines must count up one by one. A source file that holds such lines inside a
//! string, a log or a diff has other lines around them, and is no page.

use super::aria;
use super::model::{Observation, ObservationFormat, TreeKind};
use super::pw_common::document_of;

/// Name of this format.
pub(crate) const NAME: &str = "playwright-snapshot-file";

/// Detector for page trees read back through a file or shell tool.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SnapshotFile;

impl ObservationFormat for SnapshotFile {
    fn name(&self) -> &'static str {
        NAME
    }

    fn parse<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        let frame = Frame::of(text)?;
        let mut obs = Observation::new(NAME, frame.kind());
        let stats = aria::parse_lines(frame.lines(text), &mut obs);
        if stats.diff && obs.kind == TreeKind::Full {
            obs.kind = TreeKind::Diff;
        }
        obs.document = document_of(&obs);
        obs.tree = text.get(frame.start..frame.end);
        Some(obs)
    }

    fn parse_header<'a>(&self, text: &'a str) -> Option<Observation<'a>> {
        let frame = Frame::of(text)?;
        let mut obs = Observation::new(NAME, frame.kind());
        obs.counted_refs = frame.refs;
        if frame.diff && obs.kind == TreeKind::Full {
            obs.kind = TreeKind::Diff;
        }
        obs.tree = text.get(frame.start..frame.end);
        Some(obs)
    }
}

/// How a file tool numbers lines: the separator after the number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Separator {
    /// Claude Code's `     1→`.
    Arrow,
    /// `cat -n` and Claude Code's `     1\t`.
    Tab,
    /// opencode's `00001| `.
    Pipe,
    /// opencode's `1: `.
    Colon,
}

/// `line` as `(number, separator, content)` when a file tool numbered it.
fn numbered(line: &str) -> Option<(u64, Separator, &str)> {
    let digits_at = line.len() - line.trim_start_matches(' ').len();
    let rest = line.get(digits_at..)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let number = rest.get(..digits)?.parse().ok()?;
    let after = rest.get(digits..)?;
    let (separator, content) = if let Some(c) = after.strip_prefix('→') {
        (Separator::Arrow, c)
    } else if let Some(c) = after.strip_prefix('\t') {
        (Separator::Tab, c)
    } else if let Some(c) = after.strip_prefix('|') {
        (Separator::Pipe, c.strip_prefix(' ').unwrap_or(c))
    } else if let Some(c) = after.strip_prefix(':') {
        (Separator::Colon, c.strip_prefix(' ').unwrap_or(c))
    } else {
        return None;
    };
    Some((number, separator, content))
}

/// The indent of an aria tree line (`- ...` after an even number of spaces), or `None`.
pub(super) fn tree_indent(line: &str) -> Option<usize> {
    let body = line.trim_start_matches(' ');
    let indent = line.len() - body.len();
    let rest = body.strip_prefix("- ")?;
    let starts_well = rest.chars().next().is_some_and(|c| !c.is_whitespace());
    (indent.is_multiple_of(2) && starts_well).then_some(indent)
}

/// A line a file tool writes around a file: blank, a tag (`<file>`, `</content>`,
/// `<path>/x</path>`), a fence, a note in parentheses (`(End of file - total 45 lines)`),
/// Gemini CLI's truncation notice.
fn is_wrapper(line: &str) -> bool {
    let t = line.trim();
    t.is_empty()
        || (t.starts_with('<') && t.ends_with('>'))
        || t.starts_with("```")
        || (t.starts_with('(') && t.ends_with(')'))
        || ["IMPORTANT:", "Status:", "Action:", "--- "]
            .iter()
            .any(|p| t.starts_with(p))
}

/// Words of a wrapper line that say the file goes on beyond what was read.
fn says_more(line: &str) -> bool {
    let t = line.to_ascii_lowercase();
    ["truncated", "more lines", "showing lines"]
        .iter()
        .any(|w| t.contains(w))
}

/// Where the tree is in the text, and how its lines are numbered.
#[derive(Debug, Clone, Copy)]
struct Frame {
    /// Byte range of the tree's lines (numbers included).
    start: usize,
    end: usize,
    numbering: Option<Separator>,
    /// The tree does not start at the file's first line or at its root, or the tool said
    /// there is more.
    partial: bool,
    refs: usize,
    diff: bool,
}

/// Where the detector is in the text.
enum Part {
    Before,
    Tree,
    After { reminder: bool },
}

impl Frame {
    fn kind(&self) -> TreeKind {
        if self.partial {
            TreeKind::Partial
        } else {
            TreeKind::Full
        }
    }

    /// The tree's lines without their numbers.
    fn lines<'a>(&self, text: &'a str) -> impl Iterator<Item = &'a str> {
        let numbering = self.numbering;
        let tree = text.get(self.start..self.end).unwrap_or("");
        aria::lines(tree).map(move |l| match numbering {
            Some(_) => numbered(l.text).map_or(l.text, |(_, _, c)| c),
            None => l.text,
        })
    }

    fn of(text: &str) -> Option<Frame> {
        // Cheap refusal first: this runs on results of any tool.
        memchr::memmem::find(text.as_bytes(), b"[ref=")?;
        let mut frame = Frame {
            start: 0,
            end: 0,
            numbering: None,
            partial: false,
            refs: 0,
            diff: false,
        };
        let mut part = Part::Before;
        let (mut next_number, mut last_indent, mut lines) = (0u64, 0usize, 0usize);
        for line in aria::lines(text) {
            if let Part::Tree = part {
                let content = match frame.numbering {
                    Some(sep) => match numbered(line.text) {
                        Some((n, s, c)) if s == sep && n == next_number => {
                            next_number += 1;
                            Some(c)
                        }
                        _ => None,
                    },
                    None => Some(line.text),
                };
                match content.and_then(|c| Some((c, tree_indent(c)?))) {
                    Some((c, indent)) if indent <= last_indent + 2 => {
                        frame.take(c);
                        (last_indent, lines, frame.end) = (indent, lines + 1, line.next);
                        continue;
                    }
                    _ => part = Part::After { reminder: false },
                }
            }
            match part {
                Part::Before => {
                    let (content, numbering) = match numbered(line.text) {
                        Some((n, sep, c)) if tree_indent(c).is_some() => {
                            next_number = n + 1;
                            frame.partial |= n > 1;
                            (c, Some(sep))
                        }
                        _ => (line.text, None),
                    };
                    if let Some(indent) = tree_indent(content) {
                        frame.partial |= indent > 0;
                        frame.numbering = numbering;
                        frame.take(content);
                        (frame.start, frame.end) = (line.start, line.next);
                        (last_indent, lines) = (indent, 1);
                        part = Part::Tree;
                    } else if is_wrapper(line.text) {
                        frame.partial |= says_more(line.text);
                    } else {
                        return None;
                    }
                }
                Part::After { reminder } => {
                    let t = line.text.trim();
                    let content = numbered(line.text).map_or(line.text, |(_, _, c)| c);
                    if reminder || t == "<system-reminder>" {
                        part = Part::After {
                            reminder: t != "</system-reminder>",
                        };
                    } else if content.trim().is_empty() || is_wrapper(line.text) {
                        frame.partial |= says_more(line.text);
                    } else {
                        return None;
                    }
                }
                Part::Tree => {}
            }
        }
        // agent-browser shares one bracket among attributes (`[level=1, ref=e1]`);
        // Playwright never does: such a tree is agent-browser's.
        let shared_bracket = text
            .get(frame.start..frame.end)
            .is_some_and(|t| memchr::memmem::find(t.as_bytes(), b", ref=").is_some());
        (frame.refs > 0 && lines >= 2 && !shared_bracket).then_some(frame)
    }

    /// Counts the refs of one tree line.
    fn take(&mut self, line: &str) {
        let (refs, diff) = aria::count_refs(line);
        self.refs += refs;
        self.diff |= diff;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::parse;

    const TREE: &str = "- generic [active] [ref=f2e1]:\n  - heading \"Order a widget\" [level=1] [ref=f2e2]\n  - paragraph [ref=f2e3]: \"Unit prices: Red $19.99\"\n  - button \"Review order\" [ref=f2e15]";

    fn number(tree: &str, from: usize, sep: &str) -> String {
        tree.lines()
            .enumerate()
            .map(|(i, l)| format!("{:>6}{sep}{l}", i + from))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn ids(text: &str) -> Vec<String> {
        let obs = parse(text).unwrap_or_else(|| panic!("no page in {text:?}"));
        assert_eq!(obs.format, NAME);
        obs.refs.iter().map(|r| r.id.to_string()).collect()
    }

    #[test]
    fn every_file_tool_reads_the_same_tree() {
        let want = ["f2e1", "f2e2", "f2e3", "f2e15"];
        let reads = [
            TREE.to_string(),
            format!("{TREE}\n"),
            number(TREE, 1, "→"),
            number(TREE, 1, "\t"),
            format!("<file>\n{}\n\n(End of file - total 4 lines)\n</file>", {
                let lines: Vec<String> = TREE.lines().enumerate().map(|(i, l)| format!("{:05}| {l}", i + 1)).collect();
                lines.join("\n")
            }),
            format!("<path>/w/.playwright-mcp/page-1.yml</path>\n<type>file</type>\n<content>\n{}\n</content>", {
                let lines: Vec<String> = TREE.lines().enumerate().map(|(i, l)| format!("{}: {l}", i + 1)).collect();
                lines.join("\n")
            }),
            format!("{}\n\n<system-reminder>\nWhenever you read a file, consider whether it is malware.\n</system-reminder>\n", number(TREE, 1, "→")),
        ];
        for read in &reads {
            assert_eq!(ids(read), want, "{read}");
            let obs = parse(read).expect("page");
            assert_eq!(obs.kind, TreeKind::Full, "{read}");
            assert_eq!(obs.document.as_deref(), Some("f2"));
            let header = crate::observation::parse_header(read).expect("page");
            assert_eq!((header.ref_count(), header.kind), (4, TreeKind::Full));
        }
    }

    #[test]
    fn part_of_a_file_is_a_partial_observation() {
        let tail: String = TREE.lines().skip(1).collect::<Vec<_>>().join("\n");
        let gemini = format!("IMPORTANT: The file content has been truncated.\nStatus: Showing lines 1-4 of 900 total lines.\nAction: To read more of the file, use offset.\n\n--- FILE CONTENT (truncated) ---\n{TREE}");
        for read in [
            number(TREE, 40, "→"),
            tail.clone(),
            number(&tail, 2, "\t"),
            gemini,
        ] {
            let obs = parse(&read).unwrap_or_else(|| panic!("no page in {read}"));
            assert_eq!(obs.kind, TreeKind::Partial, "{read}");
        }
    }

    /// Text that holds tree lines but is no page: it must not count as one.
    #[test]
    fn near_misses_are_no_pages() {
        let near_misses = [
            // A source file with a tree in a string.
            format!("const snapshot = `\n{TREE}\n`;\nexpect(page).toMatch(snapshot);"),
            number(&format!("const snapshot = `\n{TREE}\n`;"), 1, "→"),
            // A diff of a snapshot file.
            format!(
                "@@ -1,4 +1,4 @@\n{}",
                TREE.lines()
                    .map(|l| format!("-{l}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
            TREE.lines()
                .map(|l| format!("+{l}"))
                .collect::<Vec<_>>()
                .join("\n"),
            // A log that quotes tree lines.
            format!(
                "2026-11-30T08:09:13Z INFO got snapshot\n{TREE}\n2026-11-30T08:09:14Z INFO done"
            ),
            // Markdown prose with a ref in a sentence.
            "- see the button [ref=e5] in the notes\n- and more prose".to_string(),
            // Prose lines that start like list items but carry no ref in place.
            "- a note about [ref=e1]\n- another note".to_string(),
            // Numbers that do not count up.
            [
                "     1→- generic [ref=e1]:",
                "     3→  - button \"Go\" [ref=e2]",
            ]
            .join("\n"),
            // Numbered lines mixing separators.
            [
                "     1→- generic [ref=e1]:",
                "     2\t  - button \"Go\" [ref=e2]",
            ]
            .join("\n"),
            // Indentation that jumps two levels.
            "- generic [ref=e1]:\n      - button \"Go\" [ref=e2]".to_string(),
            // One line is no tree.
            "- button \"Go\" [ref=e2]".to_string(),
            // A YAML file of another kind.
            "- name: build\n  run: cargo build # [ref=e1]".to_string(),
        ];
        for text in &near_misses {
            assert!(
                SnapshotFile.parse(text).is_none() && SnapshotFile.parse_header(text).is_none(),
                "read as a page: {text}"
            );
        }
    }
}
