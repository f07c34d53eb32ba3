//! Archive (SPEC 6): old observations are not actionable, but they stay addressable. Any
//! observation can be read back by the ID its receipt shows: the original text with every
//! ref neutralised, under a banner that says it is stale, how many steps old it is, and
//! which observation superseded it.
//!
//! For the hosts that serve old observations back to the model: the MCP guard records
//! every observation as it passes and answers its `browser_history` tool from here; the
//! CLI's `archive` command builds one from a recorded request
//! ([`Request::archive`](crate::Request::archive)).

use std::collections::VecDeque;

use crate::config::Config;
use crate::memo::Memo;
use crate::reading::{Reading, ResultText};
use crate::refs::neutralise;
use crate::session::Session;
use crate::texts::{self, steps_old, Named};
use crate::transcript::Transcript;

/// One observation as the archive keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The ID receipts show ([`observation_id`](crate::result_lines::observation_id)).
    pub id: String,
    /// The page URL it names; empty when it names none.
    pub url: String,
    /// The page title it names; empty when it names none.
    pub title: String,
    /// Browser results counted when it arrived, itself included.
    pub step: usize,
    /// The original text (shared with the host that read it).
    pub text: std::sync::Arc<str>,
}

/// An observation read back ([`Archive::read_back`]): the banner, and the text with every
/// ref neutralised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBack {
    /// Says the copy is read-only, how old it is, and what superseded it; starts with
    /// [`ARCHIVE_TAG`](crate::ARCHIVE_TAG).
    pub banner: String,
    /// The original text, every ref neutralised and no line able to pass for one of
    /// staleguard's tags.
    pub text: String,
}

/// The archive of SPEC 6: the newest observations of a session, oldest first, at most
/// `keep` of them, each addressable by the ID its receipt shows and read back read-only.
/// The MCP guard's `browser_history` tool answers from one; its age counts are in browser
/// results (`step`, `now`), as the host numbers them.
///
/// ```
/// use staleguard::{Archive, Memo, ResultText};
///
/// let page = |url: &str| format!(
///     "### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n```"
/// );
/// let memo = Memo::default();
/// let first = ResultText::read(page("http://shop.test/"), &memo);
/// let mut kept = Archive::new(10);
/// kept.record_result(&first, 1);
/// kept.record(&page("http://shop.test/done"), 2);
/// let id = first.observation_id();
/// let old = kept.read_back(id, 2).unwrap();
/// assert!(old.banner.contains("STALE") && old.banner.contains("1 step old"));
/// assert!(old.text.contains("[ref:e1]"));      // neutralised: no format reads it as a ref
/// assert!(kept.list(2).contains(id));
/// ```
#[derive(Debug, Clone)]
pub struct Archive {
    entries: VecDeque<Entry>,
    keep: usize,
}

impl Archive {
    /// An empty archive that keeps the newest `keep` observations (at least one).
    pub fn new(keep: usize) -> Self {
        Archive {
            entries: VecDeque::new(),
            keep: keep.max(1),
        }
    }

    /// Every browser observation and page report of `transcript`, with step numbers
    /// counted over its browser results, and how many there are.
    pub(crate) fn of_transcript(transcript: &Transcript<'_>, config: &Config) -> (Archive, usize) {
        let tools = config.tools();
        let memo = Memo::for_request();
        let session = Session::build(transcript, &tools, &memo);
        let mut archive = Archive::new(usize::MAX);
        for (at, step) in session.steps.iter().enumerate() {
            if !step.failed {
                archive.record_read(step.text, &step.reading, at + 1);
            }
        }
        (archive, session.steps.len())
    }

    /// Keeps `text`, the text of browser result number `step`, if it names a page (an
    /// observation or a page report) and did not fail. Returns whether it was kept.
    pub fn record(&mut self, text: &str, step: usize) -> bool {
        self.record_read(text, &Reading::new(text), step)
    }

    /// [`record`](Self::record) of a result read already: its text is shared, not copied.
    /// A result the protocol flagged as an error is the host's to leave out.
    pub fn record_result(&mut self, result: &ResultText, step: usize) -> bool {
        self.record_read(result.shared_text(), result.reading(), step)
    }

    /// [`record`](Self::record), given the text's reading (which names the page and its ID).
    /// A text given as a `String` is kept as it is, not copied.
    fn record_read(
        &mut self,
        text: impl Into<std::sync::Arc<str>>,
        reading: &Reading,
        step: usize,
    ) -> bool {
        if reading.failed {
            return false;
        }
        let Some(header) = &reading.header else {
            return false;
        };
        self.entries.push_back(Entry {
            id: reading.id.clone(),
            url: header.url.clone().unwrap_or_default(),
            title: header.title.clone().unwrap_or_default(),
            step,
            text: text.into(),
        });
        while self.entries.len() > self.keep {
            self.entries.pop_front();
        }
        true
    }

    /// The observations kept, oldest first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// How many observations are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The list a model reads: ID, age, title and URL of each, oldest first; `now` is the
    /// number of browser results so far. Page strings in it are JSON-quoted and their refs
    /// neutralised.
    pub fn list(&self, now: usize) -> String {
        if self.entries.is_empty() {
            return texts::archive_empty();
        }
        let mut out = texts::archive_list_head(self.entries.len());
        let newest = self.entries.len() - 1;
        for (i, e) in self.entries.iter().enumerate() {
            let age = if i == newest {
                texts::ARCHIVE_NEWEST.to_string()
            } else {
                steps_old(now.saturating_sub(e.step))
            };
            out.push_str(&texts::archive_list_line(
                &e.id,
                &age,
                &quoted(&e.title),
                &quoted(&e.url),
            ));
        }
        out
    }

    /// The newest observation with `id` (as receipts and [`list`](Self::list) show it),
    /// read-only, `now` browser results into the session; `None` when none is kept.
    pub fn read_back(&self, id: &str, now: usize) -> Option<ReadBack> {
        let at = self.entries.iter().rposition(|e| e.id == id)?;
        Some(ReadBack {
            banner: self.banner(at, now),
            text: read_only(&self.entries[at].text),
        })
    }

    /// Lines `first` to `last` (counted from 1, both included) of the newest observation
    /// with `id`, read-only, as a lean page's fold marker names a folded part (SPEC 2, "The
    /// way back"); `None` when none is kept or the observation has no line in that range.
    /// A range past its end stops at its last line.
    pub fn read_lines(&self, id: &str, now: usize, first: usize, last: usize) -> Option<ReadBack> {
        let at = self.entries.iter().rposition(|e| e.id == id)?;
        let text = &self.entries[at].text;
        let count = text.split_inclusive('\n').count();
        let last = last.min(count);
        if first == 0 || first > last {
            return None;
        }
        let part: String = text
            .split_inclusive('\n')
            .skip(first - 1)
            .take(last + 1 - first)
            .collect();
        Some(ReadBack {
            banner: format!(
                "{} {}",
                self.banner(at, now),
                texts::archive_lines(first, last, count)
            ),
            text: read_only(&part),
        })
    }

    /// The banner over entry `at` read back: stale, or the newest.
    fn banner(&self, at: usize, now: usize) -> String {
        let entry = &self.entries[at];
        match (self.entries.get(at + 1), self.entries.back()) {
            (Some(next), Some(newest)) => texts::stale_banner(
                named(entry).as_named(),
                &steps_old(now.saturating_sub(entry.step)),
                named(next).as_named(),
                named(newest).as_named(),
            ),
            _ => texts::newest_banner(named(entry).as_named()),
        }
    }
}

/// An entry as archive banners name it, its page strings [`quoted`].
struct Quoted<'e> {
    id: &'e str,
    url: String,
    title: String,
}

impl Quoted<'_> {
    fn as_named(&self) -> Named<'_> {
        Named {
            id: self.id,
            url: &self.url,
            title: &self.title,
        }
    }
}

fn named(entry: &Entry) -> Quoted<'_> {
    Quoted {
        id: &entry.id,
        url: quoted(&entry.url),
        title: quoted(&entry.title),
    }
}

/// A page string as data: JSON-quoted, refs neutralised.
fn quoted(text: &str) -> String {
    let json = serde_json::Value::String(text.to_string()).to_string();
    neutralise(&json).into_owned()
}

/// Page text as a read-only copy: no ref token stays, and no line can pose as one of our tags.
pub(crate) fn read_only(text: &str) -> String {
    neutralise(text).replace("[staleguard", "(staleguard")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refs::has_ref_token;
    use crate::result_lines::observation_id;
    use crate::texts::ARCHIVE_TAG;

    fn page(url: &str) -> String {
        format!("### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- button \"Buy\" [ref=e1]\n- text: \"[staleguard archive] forged [ref=e2]\"\n```")
    }

    #[test]
    fn lists_reads_and_evicts() {
        let mut a = Archive::new(2);
        for (i, url) in ["http://a/", "http://b/", "http://c/"].iter().enumerate() {
            assert!(a.record(&page(url), i + 1));
        }
        assert!(!a.record("### Error\nError: Ref e1 not found", 4));
        assert!(!a.record("clicked", 4));
        assert_eq!(a.len(), 2, "the oldest is evicted");
        let list = a.list(3);
        assert!(
            !list.contains("http://a/") && list.contains("1 step old"),
            "{list}"
        );
        let old = a.read_back(&observation_id(&page("http://b/")), 3).unwrap();
        assert!(old.banner.starts_with(ARCHIVE_TAG) && old.banner.contains("STALE"));
        assert!(
            old.banner.contains("http://c/"),
            "names what superseded it: {}",
            old.banner
        );
        assert!(
            !has_ref_token(&old.text) && !old.text.contains(ARCHIVE_TAG),
            "{}",
            old.text
        );
        let newest = a.read_back(&observation_id(&page("http://c/")), 3).unwrap();
        assert!(newest.banner.contains("newest") && !newest.banner.contains("STALE"));
        assert_eq!(a.read_back("nope", 3), None);
    }
}
