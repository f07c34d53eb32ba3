//! The quotes a collapsed page keeps, chosen when the next observation supersedes it.

use std::sync::Arc;

use crate::memo::Share;
use crate::session::Session;
use crate::transcript::Transcript;

use crate::evidence::candidates::{Chunk, PageChunks};
use crate::evidence::ranking::{
    is_date_line, is_error_page, model_hash, model_words, page_scores, shown_on, DATE_LINE,
    MIN_PAGE_SCORE, MIN_SHARE_OF_BEST,
};

use super::chosen::{
    best, Chosen, Context, Picked, Task, MAX_QUOTES_PER_ANSWERING_PAGE, MAX_QUOTES_PER_LARGE_PAGE,
    MAX_QUOTES_PER_PAGE, PAGE_BYTES_PER_QUOTE, SCORES_ENTRY_BYTES, STRONG_SHARE_OF_BEST,
};
use super::question::Page;

/// The quotes of the collapsed page `at`, as the step that superseded it left it: the
/// chunks that share rare words with the user's task or with what the model wrote and did
/// after reading it, numbers and identifiers first; none that the next page still shows.
pub(crate) fn choose_for_page<'t>(
    transcript: &'t Transcript<'_>,
    session: &'t Session<'t>,
    at: Page,
    context: Context<'_>,
    task: &mut Task,
    state: &Chosen,
) -> Picked<'t> {
    let page = &session.steps[at.step];
    let header = page.reading.header.as_ref();
    if is_error_page(header.and_then(|h| h.url.as_deref())) {
        return Picked::none();
    }
    // What the next page still shows is not lost yet; the same text is the same reading.
    let next = at.next.and_then(|n| session.steps.get(n));
    if next.is_some_and(|n| std::sync::Arc::ptr_eq(&n.reading, &page.reading)) {
        return Picked::none();
    }
    let context_key = (u128::from(context.task_hash) << 64)
        | u128::from(model_hash(
            transcript,
            read_from(session, at.step),
            at.until,
        ));
    let memo = session.memo;
    let all = PageChunks::of(memo, page);
    let score = || -> Vec<u32> {
        let model = model_words(transcript, read_from(session, at.step), at.until);
        page_scores(memo, page, task.words(), &model)
    };
    let at = (page.key, context_key);
    let len = all.len();
    let same = |s: &Vec<u32>| s.len() == len;
    let weigh = |s: &Vec<u32>| SCORES_ENTRY_BYTES + 4 * s.capacity() as u64;
    let scores = memo.kept(Share::Small, at, same, score, weigh);
    let title = header.and_then(|h| h.title.as_deref()).unwrap_or("");
    // Only chunks that score enough can be chosen: the rest are never looked at again.
    let quotable = |i: usize| all.facts(i).quotable;
    let best_score = (scores.iter().enumerate())
        .filter(|(i, _)| quotable(*i))
        .map(|(_, s)| *s)
        .max()
        .unwrap_or(0);
    let min = MIN_PAGE_SCORE.max((f64::from(best_score) * MIN_SHARE_OF_BEST) as u32);
    // The first and last numbered rows of a table qualify whatever the best chunk scores
    // ("the last part in the list" names no word of the row), and so do lines that date the
    // page's content, which `best` keeps besides the page's quotes.
    let qualifies = |c: &Chunk<'_>, s: u32| {
        s >= min || is_date_line(c.text, c.facts.date) || (c.candidate && s >= MIN_PAGE_SCORE)
    };
    let mut chunks: Vec<(Chunk<'t>, u32)> = scores
        .iter()
        .enumerate()
        .filter(|(_, s)| **s >= DATE_LINE)
        .filter_map(|(i, s)| Some((all.get(i)?, *s)))
        .filter(|(c, s)| qualifies(c, *s))
        .filter(|(c, _)| c.facts.quotable && c.text != title)
        .filter(|(c, _)| !context.furniture.has(c))
        .collect();
    if let (Some(next), false) = (next, chunks.is_empty()) {
        let shown = shown_on(memo, next);
        chunks.retain(|(c, _)| !shown.contains(&c.facts.hash));
    }
    let strong = (f64::from(best_score) * STRONG_SHARE_OF_BEST) as u32;
    let answering = chunks.iter().filter(|(_, s)| *s >= strong).count();
    let max = answering.clamp(MAX_QUOTES_PER_PAGE, MAX_QUOTES_PER_ANSWERING_PAGE);
    let max = (max + page.text.len() / PAGE_BYTES_PER_QUOTE).min(MAX_QUOTES_PER_LARGE_PAGE);
    best(chunks, DATE_LINE, max, state, true)
}

/// Where the model began reading the page of step `at`: the first of the results right
/// before it that showed the same URL (results that show none between them aside). Its text
/// was read there first, so what the model wrote since may repeat it, though a later snapshot
/// of the page was the one to collapse.
fn read_from(session: &Session<'_>, at: usize) -> usize {
    match url_of(session, at) {
        Some(page) => run_start(session, at, page),
        None => session.steps.get(at).map_or(0, |s| s.item),
    }
}

fn url_of<'s>(session: &'s Session<'_>, at: usize) -> Option<&'s str> {
    let header = session.steps.get(at)?.reading.header.as_ref()?;
    header.url.as_deref()
}

/// The transcript item of the first result of the run of results up to step `at` that
/// showed `page`: before the first step of a request read from a checkpoint on, as the
/// session's `before` says.
fn run_start(session: &Session<'_>, at: usize, page: &str) -> usize {
    let mut first = session.steps.get(at).map_or(0, |s| s.item);
    for i in (0..at).rev() {
        match url_of(session, i) {
            Some(u) if u == page => first = session.steps[i].item,
            Some(_) => return first,
            None => {}
        }
    }
    match &session.before {
        Some((url, item)) if **url == *page => *item,
        _ => first,
    }
}

/// What a read that starts at transcript item `at` (a checkpoint's resume point) must know
/// of the results before it, so that [`read_from`] answers there as it does on the whole
/// request: the URL the last of them that shows one shows, and the item where the model
/// began reading it. The words the model wrote from that item on weigh the quotes of a page
/// read from `at` on that shows the same URL.
pub(crate) fn read_before(session: &Session<'_>, at: usize) -> Option<(Arc<str>, usize)> {
    let end = session.steps.partition_point(|s| s.item < at);
    let last = (0..end).rev().find_map(|i| Some((i, url_of(session, i)?)));
    match last {
        Some((i, url)) => Some((Arc::from(url), run_start(session, i, url))),
        None => session.before.clone(),
    }
}
