//! Guard (SPEC 5): a browser action that names a ref the model should no longer act on is
//! refused before it reaches the browser.
//!
//! For the hosts that stand between the model and the browser: the MCP guard asks
//! [`Engine::check_tracked`](crate::Engine::check_tracked) about every call as it passes,
//! with the session its [`Tracker`] follows; the CLI's `check-call` asks
//! [`Engine::check_call`](crate::Engine::check_call) about one call after a recorded
//! request. [`Verdict`] and [`Refusal`] are re-exported at the crate
//! root; [`project`](crate::project) gives a verdict on every call of a request when
//! [`Options::verdicts`](crate::Options::verdicts) is set.

use serde_json::Value;

use crate::progress::{self, Element, Progress, Tracker};
use crate::session::Session;
use crate::texts;
use crate::tools::BrowserTools;

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

impl Refusal {
    /// Its name in the bindings' verdicts: `stale_ref`, `unknown_ref`, `reused_ref`,
    /// `needs_snapshot` or `repeated_submission`.
    ///
    /// ```
    /// assert_eq!(staleguard::Refusal::StaleRef.name(), "stale_ref");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Refusal::StaleRef => "stale_ref",
            Refusal::UnknownRef => "unknown_ref",
            Refusal::ReusedRef => "reused_ref",
            Refusal::NeedsSnapshot => "needs_snapshot",
            Refusal::RepeatedSubmission => "repeated_submission",
        }
    }
}

/// The guard's answer about one proposed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Let it through.
    Allow {
        /// What was ambiguous about the call (a ref that named another element earlier), if
        /// anything: a host may pass it on to the model.
        note: Option<String>,
    },
    /// Refuse: the host answers the call with `message` instead of running it.
    Refuse {
        /// Why the call is refused.
        why: Refusal,
        /// The error text for the model: what was wrong and what to do instead.
        message: String,
    },
}

impl Verdict {
    /// True for [`Verdict::Allow`].
    pub fn is_allowed(&self) -> bool {
        matches!(self, Verdict::Allow { .. })
    }
}

pub(crate) use crate::refs::targets;

/// What the call says it acts on: its own `element`, lower-cased (for every ref it names),
/// and what it says each ref is, `element` for the call's own ref and, for a form field
/// (`fields[]`, `elements[]`), the field's `element` or `name`.
#[derive(Default)]
struct Described {
    element: Option<String>,
    refs: Vec<(String, String)>,
}

impl Described {
    fn of(arguments: &str) -> Described {
        let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments) else {
            return Described::default();
        };
        let said = |o: &serde_json::Map<String, Value>, key: &str| {
            o.get(key).and_then(Value::as_str).map(str::to_string)
        };
        let mut refs = Vec::new();
        for holder in crate::refs::ref_holders(&args) {
            let field = !std::ptr::eq(holder, &args);
            let what =
                said(holder, "element").or_else(|| field.then(|| said(holder, "name")).flatten());
            let id = crate::refs::REF_KEYS.iter().find_map(|k| said(holder, k));
            if let (Some(id), Some(what)) = (id, what) {
                refs.push((id, what));
            }
        }
        let element = said(&args, "element").map(|e| e.to_lowercase());
        Described { element, refs }
    }

    /// What the call says ref `id` is.
    fn of_ref(&self, id: &str) -> Option<&str> {
        let own = self
            .refs
            .iter()
            .find(|(r, _)| r.trim_start_matches('@') == id);
        own.map(|(_, what)| what.as_str())
    }
}

fn describes(description: &str, element: &Element) -> bool {
    let name = element.name.to_lowercase();
    !name.is_empty() && description.contains(name.as_str())
}

/// The tool name and JSON arguments of one call as a request format writes it: an OpenAI
/// `tool_calls` entry, an Anthropic `tool_use` block, a Responses `function_call` item or a
/// Gemini `functionCall` part (or its inside). `None` when it names no tool. Hosts reach it
/// through `Engine::check_proposed`.
pub(crate) fn proposed_call(call: &Value) -> Option<(String, String)> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let call = call.get("functionCall").unwrap_or(call);
    let (name, arguments) = if let Some(f) = call.get("function") {
        (f.get("name"), f.get("arguments").map(text))
    } else if call.get("type").and_then(Value::as_str) == Some("tool_use") {
        (call.get("name"), call.get("input").map(text))
    } else {
        let arguments = call.get("arguments").or_else(|| call.get("args"));
        (call.get("name"), arguments.map(text))
    };
    let name = name?.as_str()?.to_string();
    Some((name, arguments.unwrap_or_else(|| "{}".into())))
}

/// The verdict on every browser call of `session`, each against the session as it stood
/// before that call: `(item index, verdict)`; and the progress of the same replay.
pub(crate) fn verdicts(
    session: &Session<'_>,
    tools: &BrowserTools,
    max_repeats: u32,
) -> (Progress, Vec<(usize, Verdict)>) {
    let mut out = Vec::new();
    let tracker = Tracker::new(max_repeats).replay(session, |tracker, at, name, args| {
        out.push((at, check(tracker, name, args, tools)));
    });
    (tracker.into_progress(), out)
}

/// Asks the guard about a call, given the session so far.
pub(crate) fn check(
    session: &Tracker,
    name: &str,
    arguments: &str,
    tools: &BrowserTools,
) -> Verdict {
    if !tools.is_browser(name) || reads_only(name) {
        return Verdict::Allow { note: None };
    }
    let refs = targets(arguments);
    if refs.is_empty() {
        return Verdict::Allow { note: None };
    }
    let page = session.page();
    let snapshot_tool = crate::observation::snapshot_tool(page.format);
    if session.page_unseen() {
        return refuse(
            Refusal::NeedsSnapshot,
            &texts::needs_snapshot(snapshot_tool),
        );
    }
    if let Some(wanted) = session.other_page(arguments) {
        let newest = page.page_id.as_deref().unwrap_or("?");
        let text = texts::other_page(&wanted, newest, snapshot_tool);
        return refuse(Refusal::NeedsSnapshot, &text);
    }
    let described = Described::of(arguments);
    let mut notes = Vec::new();
    for id in &refs {
        if session.page().refs.named_twice(id) {
            return refuse(Refusal::ReusedRef, &texts::named_twice(id));
        }
        if let Some(said) = described.of_ref(id) {
            if let Some(verdict) = wrong_element(session, id, said, snapshot_tool) {
                return verdict;
            }
        }
        match check_ref(session, id, described.element.as_deref()) {
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

/// A call that only reads the page (a snapshot, part of it, a search in it) acts on
/// nothing: a stale ref in it costs an error from the server at most, and it is how the
/// model gets fresh refs.
fn reads_only(tool: &str) -> bool {
    crate::tools::is_snapshot_tool(tool) || crate::tools::is_find(tool)
}

fn refuse(why: Refusal, message: &str) -> Verdict {
    Verdict::Refuse {
        why,
        message: texts::refusal(message),
    }
}

/// One ref against the newest page and the history.
fn check_ref(
    session: &Tracker,
    id: &str,
    description: Option<&str>,
) -> Result<Option<String>, Verdict> {
    let older = session.history().iter().rev().skip(1);
    let Some(now) = session.page().refs.get(id) else {
        let Some(seen) = older.clone().find(|s| s.refs.contains_key(id)) else {
            return Err(refuse(Refusal::UnknownRef, &texts::unknown_ref(id)));
        };
        return Err(refuse(
            Refusal::StaleRef,
            &texts::stale_ref(id, &seen.id, &seen.url),
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
    let what = |e: &Element| texts::element(&e.role, &e.name);
    match description {
        Some(d) if describes(d, &then) && !describes(d, &now) => Err(refuse(
            Refusal::ReusedRef,
            &texts::reused_ref(id, &what(&now), &what(&then), &seen.id, &seen.url),
        )),
        Some(_) => Ok(None),
        None => Ok(Some(texts::ambiguous_ref(
            id,
            &what(&now),
            &what(&then),
            &seen.id,
        ))),
    }
}

/// SPEC 5, "The description must fit the ref": a live ref whose element plainly is not
/// what the call says it acts on. A ref that named what the call describes on an older page
/// is left to `check_ref`, which says where it came from. An older element without a name
/// describes nothing: were it counted, a ref that named a paragraph or a container on any
/// earlier page (refs restart on every document up to 0.0.68) would escape this rule.
fn wrong_element(session: &Tracker, id: &str, said: &str, snapshot_tool: &str) -> Option<Verdict> {
    let refs = &session.page().refs;
    let now = refs.get(id)?;
    let page = || {
        refs.iter()
            .map(|(other, e)| (other.to_string(), e.name.to_string()))
            .collect()
    };
    if !crate::description::disagrees(said, id, &now.name, page) {
        return None;
    }
    let described_before = session
        .history()
        .iter()
        .filter_map(|s| s.refs.get(id))
        .any(|then| then != now && crate::description::plainly_agrees(said, &then.name));
    if described_before {
        return None;
    }
    let text = texts::wrong_element(
        id,
        &texts::element(&now.role, &now.name),
        said,
        snapshot_tool,
    );
    Some(refuse(Refusal::ReusedRef, &text))
}

fn submission(session: &Tracker, tool: &str, id: &str) -> Option<Verdict> {
    let element = session.page().refs.get(id)?;
    if !progress::is_submit_like(&element) {
        return None;
    }
    let flag = session.repeated_submission(usize::MAX, tool, &element)?;
    Some(refuse(
        Refusal::RepeatedSubmission,
        &texts::repeated_submission(
            tool,
            &texts::element(&element.role, &element.name),
            flag.reason,
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The same call, as each request format writes it, reads as one name and one set of
    /// arguments: a Gemini call's `args` are not lost (a lost argument would be allowed).
    #[test]
    fn a_proposed_call_reads_alike_in_every_format() {
        let args = json!({"ref": "e7", "element": "Place order"});
        let calls = [
            json!({"id": "c", "type": "function", "function": {"name": "browser_click", "arguments": args.to_string()}}),
            json!({"type": "tool_use", "id": "c", "name": "browser_click", "input": args}),
            json!({"type": "function_call", "call_id": "c", "name": "browser_click", "arguments": args.to_string()}),
            json!({"functionCall": {"name": "browser_click", "args": args}}),
            json!({"name": "browser_click", "args": args}),
        ];
        for call in calls {
            let (name, arguments) = proposed_call(&call).expect("a call");
            assert_eq!(name, "browser_click", "{call}");
            let read: Value = serde_json::from_str(&arguments).expect("JSON arguments");
            assert_eq!(read, args, "{call}");
        }
        assert_eq!(proposed_call(&json!({"args": {}})), None);
    }
}
