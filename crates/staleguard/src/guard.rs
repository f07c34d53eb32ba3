//! Guard (SPEC 5): a browser action that names a ref the model should no longer act on is
//! refused before it reaches the browser.

use serde_json::Value;

use crate::config::Config;
use crate::progress::{self, Element, Session};
use crate::tools::BrowserTools;
use crate::transcript::Transcript;

/// Argument keys that carry refs, at the top level or inside `fields[]`.
pub const REF_KEYS: &[&str] = &[
    "ref",
    "target",
    "startRef",
    "endRef",
    "startTarget",
    "endTarget",
];

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The ref is only on collapsed, older pages.
    StaleRef,
    /// The ref is on no page the model has seen.
    UnknownRef,
    /// The ref now names another element than the one the call describes.
    ReusedRef,
    /// The newest page has no inline tree: a fresh snapshot must come first.
    NeedsSnapshot,
    /// A repeated submission on an unchanged or confirmed page.
    RepeatedSubmission,
}

/// The guard's answer about one proposed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through; `note` says what was ambiguous, if anything.
    Allow { note: Option<String> },
    /// Refuse, with an error text for the model.
    Refuse { why: Refusal, message: String },
}

impl Verdict {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Verdict::Allow { .. })
    }
}

/// The refs a call's arguments name: every ref-bearing key, `fields[].ref|target`, and
/// agent-browser `@eN` tokens in string arguments.
pub fn targets(arguments: &str) -> Vec<String> {
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
        return at_refs(arguments);
    };
    let mut refs = Vec::new();
    let mut take = |object: &serde_json::Map<String, Value>| {
        for key in REF_KEYS {
            if let Some(Value::String(r)) = object.get(*key) {
                refs.push(r.trim_start_matches('@').to_string());
            }
        }
    };
    take(&args);
    if let Some(Value::Array(fields)) = args.get("fields") {
        fields
            .iter()
            .filter_map(Value::as_object)
            .for_each(&mut take);
    }
    for value in args.values() {
        if let Value::String(s) = value {
            refs.extend(at_refs(s));
        }
    }
    refs.sort();
    refs.dedup();
    refs
}

/// `@e12` tokens (agent-browser commands such as `click @e4`).
fn at_refs(text: &str) -> Vec<String> {
    text.match_indices('@')
        .filter_map(|(i, _)| {
            let tail = &text[i + 1..];
            let end = tail
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(tail.len());
            let id = &tail[..end];
            let mut chars = id.chars();
            (chars.next() == Some('e')
                && chars.as_str().chars().all(|c| c.is_ascii_digit())
                && id.len() > 1)
                .then(|| id.to_string())
        })
        .collect()
}

/// The call's own description of its target (`element`), lower-cased.
fn description(arguments: &str) -> Option<String> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    args.get("element")?.as_str().map(str::to_lowercase)
}

fn describes(description: &str, element: &Element) -> bool {
    let name = element.name.to_lowercase();
    !name.is_empty() && description.contains(&name)
}

/// Asks the guard about a call proposed after the whole `transcript`.
pub fn check(transcript: &Transcript<'_>, name: &str, arguments: &str, config: &Config) -> Verdict {
    let session = Session::replay(transcript, config, |_, _, _, _| {});
    check_in(&session, name, arguments, config)
}

/// The verdict on every browser call of `transcript`, each against the transcript as it
/// stood before that call: `(item index, verdict)`.
pub fn verdicts(transcript: &Transcript<'_>, config: &Config) -> Vec<(usize, Verdict)> {
    let mut out = Vec::new();
    Session::replay(transcript, config, |session, at, name, args| {
        out.push((at, check_in(session, name, args, config)));
    });
    out
}

/// Asks the guard about a call, given the session so far.
pub fn check_in(session: &Session, name: &str, arguments: &str, config: &Config) -> Verdict {
    if !BrowserTools::new(&config.browser_tools).is_browser(name) {
        return Verdict::Allow { note: None };
    }
    let refs = targets(arguments);
    if refs.is_empty() {
        return Verdict::Allow { note: None };
    }
    if session.page_unseen {
        return refuse(
            Refusal::NeedsSnapshot,
            "The newest page state has no inline snapshot, so its refs are unknown. Take a fresh snapshot (browser_snapshot) and act on the refs it shows.".into(),
        );
    }
    let description = description(arguments);
    let mut notes = Vec::new();
    for id in &refs {
        match check_ref(session, id, description.as_deref()) {
            Ok(Some(note)) => notes.push(note),
            Ok(None) => {}
            Err(verdict) => return verdict,
        }
        if let Some(verdict) = submission(session, name, id) {
            return verdict;
        }
    }
    Verdict::Allow {
        note: (!notes.is_empty()).then(|| notes.join(" ")),
    }
}

fn refuse(why: Refusal, message: String) -> Verdict {
    Verdict::Refuse {
        why,
        message: format!("staleguard refused this call: {message}"),
    }
}

/// One ref against the newest page and the history.
fn check_ref(
    session: &Session,
    id: &str,
    description: Option<&str>,
) -> Result<Option<String>, Verdict> {
    let older = session.history.iter().rev().skip(1);
    let Some(now) = session.page.refs.get(id) else {
        let Some(seen) = older.clone().find(|s| s.refs.contains_key(id)) else {
            return Err(refuse(
                Refusal::UnknownRef,
                format!("ref {id} is not on the newest page. Act only on refs from the newest snapshot."),
            ));
        };
        return Err(refuse(
            Refusal::StaleRef,
            format!(
                "ref {id} comes from an older page (observation {} at {}); it is stale and not on the newest page. Act on the newest snapshot.",
                seen.id, seen.url
            ),
        ));
    };
    // Servers up to 0.0.68 restart refs on every document: the same ref may name another
    // element on an older page, and the call may mean that one.
    let Some((seen, then)) = older
        .filter_map(|s| Some((s, s.refs.get(id)?)))
        .find(|(_, then)| *then != now)
    else {
        return Ok(None);
    };
    let what = |e: &Element| format!("{} {:?}", e.role, e.name);
    match description {
        Some(d) if describes(d, then) && !describes(d, now) => Err(refuse(
            Refusal::ReusedRef,
            format!(
                "ref {id} now names {} on the newest page; it named {} on an older page (observation {} at {}). Take the ref from the newest snapshot.",
                what(now),
                what(then),
                seen.id,
                seen.url
            ),
        )),
        Some(_) => Ok(None),
        None => Ok(Some(format!(
            "ref {id} names {} now and named {} on observation {}; the call gives no description.",
            what(now),
            what(then),
            seen.id
        ))),
    }
}

fn submission(session: &Session, tool: &str, id: &str) -> Option<Verdict> {
    let element = session.page.refs.get(id)?;
    if !progress::is_submit_like(element) {
        return None;
    }
    let flag = session.repeated_submission(usize::MAX, tool, element)?;
    Some(refuse(
        Refusal::RepeatedSubmission,
        format!(
            "this repeats the {} on {} {:?} ({}). Read back the requested outcome on the page first; do not submit again unless the page shows the first one failed.",
            tool, element.role, element.name, flag.reason
        ),
    ))
}
