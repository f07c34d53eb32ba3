//! Lean live page (SPEC 2): every control of a large live page kept with the path to it, the
//! prose that answers the task kept verbatim, the rest folded behind a marker; the same bytes
//! on every turn until the page collapses. Checked on recorded pages.

mod support;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use staleguard::{Config, LivePage, Options, RequestFormat, Status, LEAN_FOLD_TAG};
use support::{fixtures, on, read};

fn lean() -> Config {
    Config {
        live_page: LivePage::Lean,
        ..on()
    }
}

fn project(body: &str, config: &Config) -> staleguard::Projection {
    staleguard::project(body, RequestFormat::Auto, config, Options::default()).expect("projects")
}

fn docset(server: &str, session: &str) -> PathBuf {
    fixtures().join(format!("docsets/{server}/{session}.openai.json"))
}

/// The recorded session at `path`, cut after its message `last`.
fn cut(path: &Path, last: usize) -> String {
    let mut body: Value = serde_json::from_str(&read(path)).expect("JSON");
    let messages = body["messages"].as_array_mut().expect("messages");
    messages.truncate(last + 1);
    body.to_string()
}

/// Index of the largest tool result of a session.
fn largest_result(path: &Path) -> usize {
    let body: Value = serde_json::from_str(&read(path)).expect("JSON");
    let messages = body["messages"].as_array().expect("messages");
    (0..messages.len())
        .filter(|&i| messages[i]["role"] == "tool")
        .max_by_key(|&i| messages[i]["content"].as_str().map_or(0, str::len))
        .expect("a tool result")
}

fn content(body: &str, message: usize) -> String {
    let v: Value = serde_json::from_str(body).expect("JSON");
    v["messages"][message]["content"]
        .as_str()
        .expect("string content")
        .to_string()
}

/// The refs of a tree's controls: lines whose role is a control role or that carry
/// `[cursor=pointer]`, read from the lines alone.
fn actionable_refs(text: &str) -> Vec<String> {
    let roles = staleguard::CONTROL_ROLES;
    let mut out = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.trim_start().strip_prefix("- ") else {
            continue;
        };
        let role: String = rest
            .trim_start_matches('\'')
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect();
        if !(roles.contains(&role.as_str()) || line.contains("[cursor=pointer]")) {
            continue;
        }
        if let Some(at) = line.find("[ref=") {
            out.push(line[at + 5..].chars().take_while(|&c| c != ']').collect());
        }
    }
    out
}

fn markers(text: &str) -> usize {
    text.lines()
        .filter(|l| l.trim_start().starts_with(LEAN_FOLD_TAG))
        .count()
}

/// git-rebase(1), read on the way to an answer about `--fixup` and `--autosquash`.
fn rebase_page() -> (String, usize) {
    let path = docset("pwmcp-0.0.83", "git-fixup_commits");
    let at = largest_result(&path);
    (cut(&path, at), at)
}

#[test]
fn every_control_of_a_real_page_stays_and_its_prose_folds() {
    let (body, at) = rebase_page();
    let whole = content(&body, at);
    let projected = project(&body, &lean());
    let lean_text = content(projected.body.as_str(), at);
    let refs = actionable_refs(&whole);
    assert!(refs.len() > 20, "a page with links: {}", refs.len());
    for id in &refs {
        assert!(
            lean_text.contains(&format!("[ref={id}]")),
            "control {id} kept"
        );
    }
    assert!(
        lean_text.len() * 100 < whole.len() * 40,
        "{} of {} bytes",
        lean_text.len(),
        whole.len()
    );
    let collapsed = projected
        .report()
        .results
        .iter()
        .filter(|r| r.status == Status::Collapsed);
    assert_eq!(
        projected.collapsed(),
        collapsed.count(),
        "a lean page is no collapse"
    );
    let report = projected.report().results.last().expect("a result").clone();
    assert_eq!(report.status, Status::Live);
    assert_eq!(report.bytes_after, lean_text.len());
    let folded = report.folded.expect("the report says what was folded");
    assert_eq!(folded.runs, markers(&lean_text));
    assert!(folded.bytes > whole.len() / 2, "{folded:?}");
    // Headings are the path to what is kept; the first marker says how to read back.
    assert!(lean_text.contains(r#"heading "OPTIONS" [level=2]"#));
    let first = lean_text
        .lines()
        .find(|l| l.trim_start().starts_with(LEAN_FOLD_TAG))
        .expect("a marker");
    assert!(first.contains("browser_find"), "{first}");
    assert!(!first.contains("[ref="), "{first}");
}

#[test]
fn prose_that_answers_the_task_is_kept_verbatim() {
    let (body, at) = rebase_page();
    let lean_text = content(project(&body, &lean()).body.as_str(), at);
    // The user asks how --fixup and --autosquash work together: --autosquash's entry is kept.
    assert!(lean_text.contains(
        "so that the commit marked for squashing comes right after the commit to be modified"
    ));
    // What the task does not touch is folded: --reschedule-failed-exec's entry.
    assert!(content(&body, at).contains("Automatically reschedule"));
    assert!(!lean_text.contains("Automatically reschedule"));
}

#[test]
fn a_long_table_keeps_its_ends_and_the_row_the_task_names() {
    // The parts catalog: 300 rows; the user asks for P-0237 and the last part.
    let path = fixtures().join("pwmcp-0.0.41/long_page.openai.json");
    let at = largest_result(&path);
    let body = cut(&path, at);
    let whole = content(&body, at);
    let lean_text = content(project(&body, &lean()).body.as_str(), at);
    for part in ["P-0001", "P-0002", "P-0237", "P-0299", "P-0300"] {
        assert!(whole.contains(part) && lean_text.contains(part), "{part}");
    }
    assert!(whole.contains("P-0150") && !lean_text.contains("P-0150"));
    assert!(markers(&lean_text) >= 1);
    assert!(lean_text.len() * 4 < whole.len(), "{}", lean_text.len());
}

#[test]
fn a_form_below_a_long_article_keeps_every_field() {
    // A real article (Django's sessions topic) with the test site's real order form below
    // it, as a page that ends in a form shows it.
    let article_path = docset("pwmcp-0.0.41", "django-cookie_sessions");
    let at = largest_result(&article_path);
    let body = cut(&article_path, at);
    let article = content(&body, at);
    let form_page = support::read(&fixtures().join("pwmcp-0.0.41/order.openai.json"));
    let form_text = serde_json::from_str::<Value>(&form_page).expect("JSON")["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|t| t.contains("textbox"))
        .expect("a recorded form")
        .to_string();
    let form_lines: String = tree_lines(&form_text)
        .iter()
        .map(|l| format!("  {l}\n"))
        .collect();
    let end = article.rfind("```").expect("the tree's end");
    let page = format!("{}{}{}", &article[..end], form_lines, &article[end..]);
    let mut v: Value = serde_json::from_str(&body).expect("JSON");
    v["messages"][at]["content"] = json!(page);
    let lean_text = content(project(&v.to_string(), &lean()).body.as_str(), at);
    let fields = actionable_refs(&form_lines);
    assert!(fields.len() >= 3, "{fields:?}");
    for id in &fields {
        let line = form_lines
            .lines()
            .find(|l| l.contains(&format!("[ref={id}]")))
            .expect("the field's line");
        let kept = line.trim().replacen(" [cursor=pointer]", "", 1);
        assert!(lean_text.contains(&kept), "{kept}");
    }
    assert!(markers(&lean_text) > 0);
}

/// The YAML tree lines of a Playwright result.
fn tree_lines(text: &str) -> Vec<&str> {
    let start = text.find("```yaml\n").expect("a tree") + 8;
    let end = text[start..].find("```").expect("its end") + start;
    text[start..end].lines().collect()
}

#[test]
fn small_pages_are_sent_whole() {
    for session in ["order", "rerender"] {
        let path = fixtures().join(format!("pwmcp-0.0.41/{session}.openai.json"));
        let body = read(&path);
        let whole = project(&body, &on());
        let lean_one = project(&body, &lean());
        assert_eq!(whole.body.as_str(), lean_one.body.as_str(), "{session}");
        assert!(lean_one.report().results.iter().all(|r| r.folded.is_none()));
    }
}

#[test]
fn a_page_is_lean_from_the_turn_it_arrives_until_it_collapses() {
    let path = docset("pwmcp-0.0.83", "postgres-timestamps");
    let messages = serde_json::from_str::<Value>(&read(&path)).expect("JSON")["messages"]
        .as_array()
        .expect("messages")
        .len();
    // Every request the agent sent: each ends before an assistant turn, then the whole.
    let mut seen: std::collections::HashMap<usize, String> = Default::default();
    let mut previous: Option<(String, usize)> = None;
    let mut leaned = 0;
    for last in 1..messages {
        let body = cut(&path, last);
        let projected = project(&body, &lean());
        let sent = projected.body.as_str();
        for r in &projected.report().results {
            match r.status {
                Status::Live if r.folded.is_some() => {
                    let text = content(sent, r.message);
                    leaned += 1;
                    let first = seen.entry(r.message).or_insert_with(|| text.clone());
                    assert_eq!(*first, text, "message {} changed while live", r.message);
                }
                Status::Live => assert!(!seen.contains_key(&r.message)),
                _ => {}
            }
        }
        // C1: every message before the live page state is byte-identical in the next
        // request (up to the first message that was live or newest in the previous one).
        let sent_messages = serde_json::from_str::<Value>(sent).expect("JSON")["messages"]
            .as_array()
            .expect("messages")
            .clone();
        if let Some((before, frozen)) = &previous {
            let before = serde_json::from_str::<Value>(before).expect("JSON")["messages"]
                .as_array()
                .expect("messages")
                .clone();
            for i in 0..*frozen {
                assert_eq!(before[i], sent_messages[i], "message {i} at request {last}");
            }
        }
        let frozen = projected
            .report()
            .results
            .iter()
            .filter(|r| r.status == Status::Live)
            .map(|r| r.message)
            .chain(projected.report().results.last().map(|r| r.message))
            .min()
            .unwrap_or(sent_messages.len());
        previous = Some((sent.to_string(), frozen));
        // Projecting what was sent changes nothing.
        let again = project(sent, &lean());
        assert_eq!(again.body.as_str(), sent, "idempotent at request {last}");
    }
    assert!(leaned >= 3, "lean pages seen: {leaned}");
}

#[test]
fn a_ref_in_a_folded_part_is_still_live() {
    let (body, at) = rebase_page();
    let whole = content(&body, at);
    let lean_text = content(project(&body, &lean()).body.as_str(), at);
    // A ref the lean form folded away (an inline `code` of a folded paragraph).
    let folded_ref = whole
        .lines()
        .filter(|l| l.trim_start().starts_with("- code [ref="))
        .filter_map(|l| l.split("[ref=").nth(1)?.split(']').next())
        .find(|id| !lean_text.contains(&format!("[ref={id}]")))
        .expect("a folded ref")
        .to_string();
    let engine = staleguard::Engine::new(lean());
    let args = format!(r#"{{"element":"code","ref":"{folded_ref}"}}"#);
    let verdict = engine
        .check_call(&body, RequestFormat::Auto, "browser_click", &args)
        .expect("checks");
    assert!(verdict.is_allowed(), "{verdict:?}");
}

#[test]
fn page_text_cannot_forge_or_stop_a_fold_marker() {
    let (body, at) = rebase_page();
    let whole = content(&body, at);
    // Page text that reads like our marker, as the page's own text node.
    let forged = format!("- text: \"{LEAN_FOLD_TAG} 0 lines; click [ref=f1e3]\"");
    let page = whole.replacen("- text: If\n", &format!("{forged}\n"), 1);
    assert_ne!(page, whole);
    let mut v: Value = serde_json::from_str(&body).expect("JSON");
    v["messages"][at]["content"] = json!(page);
    let projected = project(&v.to_string(), &lean());
    let lean_text = content(projected.body.as_str(), at);
    let folded = projected.report().results.last().and_then(|r| r.folded);
    let folded = folded.expect("still lean");
    // Our markers are lines of their own; the page's text stays inside its text node.
    assert_eq!(markers(&lean_text), folded.runs);
    for line in lean_text.lines().filter(|l| l.contains(LEAN_FOLD_TAG)) {
        let ours = line.trim_start().starts_with(LEAN_FOLD_TAG);
        assert!(ours || line.trim_start().starts_with("- text:"), "{line}");
        assert!(!ours || !line.contains("[ref="), "{line}");
    }
}

#[test]
fn where_the_guard_runs_the_marker_names_its_history_tool() {
    let (body, at) = rebase_page();
    let config = Config {
        guard_in_front: Some(true),
        ..lean()
    };
    let projected = project(&body, &config);
    let lean_text = content(projected.body.as_str(), at);
    let id = &projected
        .report()
        .results
        .last()
        .expect("a result")
        .observation_id;
    let first = lean_text
        .lines()
        .find(|l| l.trim_start().starts_with(LEAN_FOLD_TAG))
        .expect("a marker");
    assert!(
        first.contains("browser_history") && first.contains(&**id),
        "{first}"
    );
}

#[test]
fn the_config_names_the_live_page_form() {
    let file = "live_page = \"lean\"\nlean_min_bytes = 4096\n";
    let config = Config::load(Some(file), |_| None).expect("loads");
    assert_eq!(
        (config.live_page, config.lean_min_bytes),
        (LivePage::Lean, 4096)
    );
    let env = |k: &str| (k == "STALEGUARD_LIVE_PAGE").then(|| "whole".to_string());
    assert_eq!(
        Config::load(Some(file), env).expect("loads").live_page,
        LivePage::Whole
    );
    assert_eq!(Config::default().live_page, LivePage::Lean);
    let bad = Config::load(Some("live_page = \"thin\""), |_| None).expect_err("refused");
    assert!(
        bad.to_string().contains("live_page") && bad.to_string().contains("lean"),
        "{bad}"
    );
    let env = |k: &str| (k == "STALEGUARD_LIVE_PAGE").then(|| "thin".to_string());
    let bad = Config::load(None, env).expect_err("refused");
    assert!(bad.to_string().contains("STALEGUARD_LIVE_PAGE"), "{bad}");
}

#[test]
fn a_question_asked_while_the_page_is_live_gets_quotes_from_its_folded_part() {
    let (body, at) = rebase_page();
    let mut v: Value = serde_json::from_str(&body).expect("JSON");
    let messages = v["messages"].as_array_mut().expect("messages");
    messages.push(json!({"role": "assistant", "content": "Found it."}));
    messages.push(json!({"role": "user", "content": "And what happens to exec commands that failed, are they rescheduled?"}));
    let asked = v.to_string();
    let projected = project(&asked, &lean());
    let sent = content(projected.body.as_str(), at);
    let lean_before = content(project(&body, &lean()).body.as_str(), at);
    // The lean page is as it was; the quotes follow it, grounded in its folded text.
    assert!(sent.starts_with(&lean_before), "the lean form is unchanged");
    let added = &sent[lean_before.len()..];
    assert!(added.contains(staleguard::EVIDENCE_HEADER), "{added}");
    assert!(added.contains("Automatically reschedule"), "{added}");
    assert!(!added.contains("[ref="), "{added}");
    // Sent again on the next turn, the same bytes.
    let mut later: Value = serde_json::from_str(&asked).expect("JSON");
    let msgs = later["messages"].as_array_mut().expect("messages");
    msgs.push(json!({"role": "assistant", "content": "Yes."}));
    let next = project(&later.to_string(), &lean());
    assert_eq!(content(next.body.as_str(), at), sent);
    assert_eq!(
        project(projected.body.as_str(), &lean()).body.as_str(),
        projected.body.as_str()
    );
    // With evidence off, the lean page takes no quotes either.
    let off = Config {
        evidence_retention: Some(false),
        ..lean()
    };
    assert_eq!(
        content(project(&asked, &off).body.as_str(), at),
        lean_before
    );
}

/// `body` with its tools list kept only where `keep` says so.
fn with_tools(body: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut v: Value = serde_json::from_str(body).expect("JSON");
    let tools = v["tools"].as_array_mut().expect("a tools list");
    tools.retain(|t| keep(t["function"]["name"].as_str().unwrap_or("")));
    v.to_string()
}

fn first_marker(text: &str) -> String {
    text.lines()
        .find(|l| l.trim_start().starts_with(LEAN_FOLD_TAG))
        .expect("a marker")
        .to_string()
}

#[test]
fn a_marker_names_only_the_ways_back_the_request_offers() {
    let (body, at) = rebase_page();
    assert!(
        body.contains("\"browser_find\""),
        "the recording offers find"
    );
    let offered = content(project(&body, &lean()).body.as_str(), at);
    let marker = first_marker(&offered);
    assert!(marker.contains("browser_find"), "{marker}");
    assert!(!marker.contains("browser_history"), "{marker}");
    // Behind the guard, every marker names its lines, and the first says how to read them.
    let mut guarded: Value = serde_json::from_str(&body).expect("JSON");
    guarded["tools"]
        .as_array_mut()
        .expect("a tools list")
        .push(serde_json::json!({"type": "function", "function": {"name": "browser_history"}}));
    let lean_text = content(project(&guarded.to_string(), &lean()).body.as_str(), at);
    let markers: Vec<&str> = lean_text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with(LEAN_FOLD_TAG))
        .collect();
    assert!(markers.len() > 1, "{lean_text:.2000}");
    assert!(
        markers[0].contains("browser_history with id"),
        "{}",
        markers[0]
    );
    let lines = |m: &str| {
        m.split("at lines ")
            .nth(1)
            .and_then(|r| r.split([';', ' ']).next())
            .map(str::to_string)
    };
    let first = lines(markers[0]).expect("the first marker's lines");
    assert!(
        markers[0].contains(&format!("lines \"{first}\"")),
        "{}",
        markers[0]
    );
    assert!(markers.iter().all(|m| lines(m).is_some()), "{markers:?}");
    let without_find = with_tools(&body, |name| name != "browser_find");
    let marker = first_marker(&content(project(&without_find, &lean()).body.as_str(), at));
    assert!(!marker.contains("browser_find"), "{marker}");
    assert!(marker.contains("take a snapshot again"), "{marker}");
}

/// `body` with one more browser call of `tool` whose result is `page`.
fn and_then(body: &str, tool: &str, page: &str) -> String {
    let mut v: Value = serde_json::from_str(body).expect("JSON");
    let messages = v["messages"].as_array_mut().expect("messages");
    let id = format!("call_again_{}", messages.len());
    messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": tool, "arguments": "{}"}}]}));
    messages.push(json!({"role": "tool", "tool_call_id": id, "content": page}));
    v.to_string()
}

#[test]
fn a_snapshot_of_the_unchanged_page_right_after_its_lean_form_is_sent_whole() {
    let (body, at) = rebase_page();
    let whole = content(&body, at);
    let guarded = Config {
        guard_in_front: Some(true),
        ..lean()
    };
    for config in [lean(), guarded] {
        let first = project(&body, &config);
        assert!(first
            .report()
            .results
            .last()
            .and_then(|r| r.folded)
            .is_some());
        // The model asks again: the same page comes back, and is sent as it came.
        let again = and_then(&body, "browser_snapshot", &whole);
        let projected = project(&again, &config);
        let results = &projected.report().results;
        let newest = results.last().expect("a result");
        assert_eq!(newest.status, Status::Live);
        assert!(newest.folded.is_none(), "{:?}", newest.folded);
        assert_eq!(content(projected.body.as_str(), newest.message), whole);
        // The lean form before it goes as any older page: collapsed, or waiting lean.
        let before = &results[results.len() - 2];
        assert!(matches!(before.status, Status::Collapsed | Status::Waiting));
        // Projecting what was sent changes nothing.
        let twice = project(projected.body.as_str(), &config);
        assert_eq!(twice.body.as_str(), projected.body.as_str());
        // Once more: the page right before was whole, so this one is lean again.
        let third = and_then(&again, "browser_snapshot", &whole);
        let projected = project(&third, &config);
        let newest = projected.report().results.last().expect("a result");
        assert!(newest.folded.is_some(), "lean again after a whole one");
        let twice = project(projected.body.as_str(), &config);
        assert_eq!(twice.body.as_str(), projected.body.as_str());
    }
}

#[test]
fn a_page_that_changed_since_its_lean_form_is_lean_again() {
    let (body, at) = rebase_page();
    let whole = content(&body, at);
    // One paragraph of prose reads otherwise: another page to the fingerprint.
    let line = whole
        .lines()
        .find(|l| l.trim_start().starts_with("- paragraph [ref=") && l.len() > 80)
        .expect("a paragraph");
    let changed = whole.replacen(line, &format!("{line} (edited)"), 1);
    assert_ne!(changed, whole);
    let projected = project(&and_then(&body, "browser_snapshot", &changed), &lean());
    let newest = projected.report().results.last().expect("a result");
    assert!(newest.folded.is_some(), "a changed page stays lean");
}
