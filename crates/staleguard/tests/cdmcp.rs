//! Chrome DevTools MCP 1.11.0 (issue 14): every recorded session in all three request
//! formats. Older snapshots collapse and the live one stays; no uid survives in what we
//! write; the facts of `fixtures/facts` stay in the tool results; a refused navigation
//! (`Unable to navigate`, not flagged by the server) is a failure; progress stalls only on
//! the invalid form.

mod support;

use serde_json::Value;
use staleguard::internal::observation::{self, cdmcp, TreeKind};
use staleguard::GUIDANCE_HEADER;
use staleguard::{RequestFormat, Status};
use support::formats::{chat_to_responses, check_any, project_as, result_slots, text_of};
use support::*;

/// The scenarios recorded with every server, and `order_inline`, recorded with this one only.
fn scenarios() -> impl Iterator<Item = &'static str> {
    SCENARIOS.into_iter().chain(["order_inline"])
}

fn recorded(scenario: &str, wire: &str) -> String {
    read(&fixtures().join(format!("cdmcp-1.11.0/{scenario}.{wire}.json")))
}

/// The scenario's body in each request format: OpenAI Chat and Anthropic as recorded, and
/// OpenAI Responses converted from the Chat body.
fn bodies(scenario: &str) -> [(RequestFormat, String); 3] {
    let chat = recorded(scenario, "openai");
    [
        (RequestFormat::Responses, chat_to_responses(&chat)),
        (RequestFormat::OpenAiChat, chat),
        (RequestFormat::Anthropic, recorded(scenario, "anthropic")),
    ]
}

/// Every tool result text of a body, in order.
fn result_texts(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).expect("JSON");
    result_slots(&v)
        .iter()
        .map(|s| text_of(v.pointer(s).unwrap_or(&Value::Null)))
        .collect()
}

/// Our own oracle, independent of the detector: a result with a `## Latest page snapshot`
/// line is an observation.
fn has_snapshot(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_end() == "## Latest page snapshot")
}

#[test]
fn every_snapshot_but_the_live_one_collapses_in_every_format() {
    for scenario in scenarios() {
        for (format, body) in bodies(scenario) {
            let p = project_as(&body, format);
            check_any(&body, &p, format);
            let texts = result_texts(&body);
            let results = &p.report().results;
            assert_eq!(
                results.len(),
                texts.len(),
                "{scenario} {format:?}: every tool is a browser tool"
            );
            let snapshots: Vec<usize> = (0..texts.len())
                .filter(|&i| has_snapshot(&texts[i]))
                .collect();
            assert!(snapshots.len() >= 3, "{scenario}");
            let statuses: Vec<Status> = results.iter().map(|r| r.status).collect();
            for (i, status) in statuses.iter().enumerate() {
                let expected = match snapshots.last() {
                    Some(&last) if i == last => Status::Live,
                    _ if snapshots.contains(&i) => Status::Collapsed,
                    _ => *status,
                };
                assert_eq!(
                    *status, expected,
                    "{scenario} {format:?} result {i}: {}",
                    texts[i]
                );
                if !snapshots.contains(&i) {
                    assert_ne!(*status, Status::Collapsed, "{scenario}: {}", texts[i]);
                }
            }
            for r in results.iter().filter(|r| r.status == Status::Collapsed) {
                assert_eq!(r.format, Some(cdmcp::NAME));
                assert!(r.refs_withheld > 0 && r.url.is_some(), "{scenario}: {r:?}");
            }
        }
    }
}

#[test]
fn no_uid_survives_in_collapsed_results_or_quotes() {
    let mut collapsed = 0;
    for scenario in scenarios() {
        for (format, body) in bodies(scenario) {
            let p = project_as(&body, format);
            let before = result_texts(&body);
            for (i, text) in result_texts(&p.body).iter().enumerate() {
                if *text == before[i] {
                    continue;
                }
                // A collapsed result (receipt and its quotes), or the live one with parts after it.
                let ours = text.strip_prefix(before[i].as_str()).unwrap_or(text);
                assert!(
                    !staleguard::internal::refs::has_ref_token(ours) && !ours.contains("uid="),
                    "{scenario} {format:?}: {ours}"
                );
                collapsed += usize::from(text.starts_with(staleguard::RECEIPT_TAG));
            }
        }
    }
    assert!(collapsed > 100, "{collapsed} collapsed results checked");
}

#[test]
fn uids_are_ref_tokens_and_neutralised() {
    let line = "  uid=4_5 button \"Place order\"";
    assert!(staleguard::internal::refs::has_ref_token(line));
    let neutral = staleguard::internal::refs::neutralise(line);
    assert!(
        !staleguard::internal::refs::has_ref_token(&neutral),
        "{neutral}"
    );
    assert!(!staleguard::internal::refs::has_ref_token(
        "Successfully clicked on the element"
    ));
}

#[test]
fn facts_stay_in_the_tool_results() {
    for scenario in scenarios() {
        // order_inline is the order flow with snapshots inline: the same facts.
        let facts_of = if scenario == "order_inline" {
            "order"
        } else {
            scenario
        };
        let facts = read(&fixtures().join(format!("facts/{facts_of}.txt")));
        for (format, body) in bodies(scenario) {
            let p = project_as(&body, format);
            let kept = result_texts(&p.body).join("\n");
            for fact in facts.lines().map(str::trim).filter(|f| !f.is_empty()) {
                assert!(kept.contains(fact), "{scenario} {format:?}: {fact:?} lost");
            }
        }
    }
}

#[test]
fn unable_to_navigate_is_a_failure_and_kept() {
    for (format, body) in bodies("research") {
        let p = project_as(&body, format);
        let (before, after) = (result_texts(&body), result_texts(&p.body));
        let refused = before
            .iter()
            .position(|t| t.starts_with("Unable to navigate"))
            .expect("research has the refused navigation");
        assert_eq!(
            p.report().results[refused].status,
            Status::Failed,
            "{format:?}"
        );
        assert_eq!(before[refused], after[refused]);
    }
    // Error results (stale uids) are failures too.
    let p = project_as(&recorded("order", "openai"), RequestFormat::OpenAiChat);
    assert!(p
        .report()
        .results
        .iter()
        .any(|r| r.status == Status::Failed));
}

fn guidance(p: &staleguard::Projection, body: &str) -> bool {
    let before = result_texts(body);
    result_texts(&p.body)
        .iter()
        .zip(&before)
        .any(|(a, b)| a != b && a.contains(GUIDANCE_HEADER))
}

#[test]
fn progress_stalls_only_on_the_invalid_form() {
    for scenario in scenarios() {
        let body = recorded(scenario, "openai");
        let steps = support::track(&transcript(&body), &on()).steps;
        let p = project(&body);
        if scenario == "invalid_form" {
            assert!(
                steps.last().is_some_and(|s| s.stalled),
                "the same coupon four times"
            );
            assert!(guidance(&p, &body), "{scenario}: guidance appended");
            continue;
        }
        assert!(!guidance(&p, &body), "{scenario}: no stall guidance");
        // rerender refreshes an unchanged list twice on purpose; the rest never stalls.
        if scenario != "rerender" {
            let counts: Vec<u32> = steps.iter().map(|s| s.no_progress).collect();
            assert!(steps.iter().all(|s| !s.stalled), "{scenario}: {counts:?}");
        }
    }
}

#[test]
fn a_re_snapshot_of_the_same_page_has_the_same_fingerprint() {
    // invalid_form: the last two snapshots differ only in the alert text's uid (3_0, 4_0).
    let body = recorded("invalid_form", "openai");
    let t = transcript(&body);
    let steps = support::track(&t, &on()).steps;
    let texts = result_texts(&body);
    let snaps: Vec<usize> = (0..texts.len())
        .filter(|&i| has_snapshot(&texts[i]))
        .collect();
    let (a, b) = (snaps[snaps.len() - 2], snaps[snaps.len() - 1]);
    assert_ne!(texts[a], texts[b]);
    assert_eq!(steps[a].fingerprint, steps[b].fingerprint);
    assert_ne!(
        steps[snaps[0]].fingerprint, steps[a].fingerprint,
        "a filled form changed"
    );
}

#[test]
fn every_result_reads_as_a_snapshot_a_page_report_or_nothing() {
    let mut kinds = [0usize; 3];
    for scenario in scenarios() {
        for text in result_texts(&recorded(scenario, "openai")) {
            let (full, header) = (observation::parse(&text), observation::parse_header(&text));
            assert_eq!(full.is_some(), header.is_some(), "{text}");
            let (Some(f), Some(h)) = (full, header) else {
                assert!(
                    !has_snapshot(&text) && !text.contains("navigated to"),
                    "{text}"
                );
                kinds[2] += 1;
                continue;
            };
            assert_eq!(
                (f.format, f.kind, f.refs.len(), &f.url, &f.title, &f.action),
                (h.format, h.kind, h.ref_count(), &h.url, &h.title, &h.action)
            );
            assert_eq!(f.format, cdmcp::NAME);
            // `## Opened pages` alone names a page that is not the selected one.
            assert!(f.url.is_some() || !f.tabs.is_empty(), "{text}");
            if has_snapshot(&text) {
                assert_eq!(f.kind, TreeKind::Full);
                let uids = text.matches("uid=").count();
                assert_eq!(f.refs.len(), uids, "{text}");
                kinds[0] += 1;
            } else {
                assert_eq!(f.kind, TreeKind::Report, "{text}");
                kinds[1] += 1;
            }
        }
    }
    assert!(kinds.iter().all(|&k| k > 10), "{kinds:?}");
}

/// The server's own words for a uid it could not act on (fixtures README, "What a stale
/// uid gives").
fn server_rejected_as_stale(answer: &str) -> bool {
    answer.starts_with("Error: Element uid ") || answer.contains("no longer exists on the page")
}

/// The guard refuses every uid the server rejected as stale, and allows every uid that
/// worked, except a repeated submission (the retried "Place order" that made a second
/// order in the recordings). In all three request formats.
#[test]
fn the_guard_refuses_the_stale_uids_the_server_rejected_and_allows_the_rest() {
    let (mut rejected, mut worked) = (0, 0);
    for scenario in scenarios() {
        for (format, body) in bodies(scenario) {
            for (id, verdict, answer) in uid_calls(&body) {
                let at = format!("{scenario} {format:?} {id}: {answer:.80}");
                if server_rejected_as_stale(&answer) {
                    rejected += 1;
                    assert!(!verdict.is_allowed(), "stale uid allowed: {at}");
                    continue;
                }
                worked += 1;
                match verdict {
                    staleguard::Verdict::Allow { .. } => {}
                    staleguard::Verdict::Refuse { why, .. } => assert_eq!(
                        why,
                        staleguard::Refusal::RepeatedSubmission,
                        "a uid that worked was refused: {at}"
                    ),
                }
            }
        }
    }
    // order call_13, order_inline call_10, rerender call_9; in three formats.
    assert_eq!(rejected, 9);
    assert!(worked > 30, "{worked} uid calls that worked");
}

/// Which refusal: a uid only in older snapshots is stale; a uid after a navigation that no
/// snapshot has shown yet needs a snapshot first, and the refusal names the server's tool.
#[test]
fn refusals_say_whether_the_uid_is_stale_or_the_page_unseen() {
    let kind = |scenario: &str, call: &str| {
        let body = recorded(scenario, "openai");
        let (_, verdict, _) = uid_calls(&body)
            .into_iter()
            .find(|(id, _, _)| id == call)
            .expect("call recorded");
        match verdict {
            staleguard::Verdict::Refuse { why, message } => (why, message),
            other => panic!("{scenario} {call} allowed: {other:?}"),
        }
    };
    let (why, message) = kind("order", "call_13");
    assert_eq!(why, staleguard::Refusal::NeedsSnapshot);
    assert!(message.contains("(take_snapshot)"), "{message}");
    let (why, message) = kind("order_inline", "call_10");
    assert_eq!(why, staleguard::Refusal::StaleRef);
    assert!(message.contains("6_5"), "{message}");
    assert_eq!(kind("rerender", "call_9").0, staleguard::Refusal::StaleRef);
}

/// The guard's verdict on a call proposed after the whole of `body`.
fn verdict_after(body: &str, name: &str, arguments: &str) -> staleguard::Verdict {
    support::check(
        &transcript(body),
        name,
        arguments,
        &staleguard::Config::default(),
    )
}

/// Page IDs scope uids: a uid of the newest snapshot is refused on another page, and a
/// list of pages that names the same page selected changes nothing.
#[test]
fn page_ids_scope_uids_and_listing_pages_changes_nothing() {
    let body = recorded("order", "openai");
    let t = transcript(&body);
    let (id, verdict, _) = uid_calls(&body)
        .into_iter()
        .rfind(|(_, v, _)| v.is_allowed())
        .expect("an allowed uid call");
    let call = t
        .items
        .iter()
        .find_map(|i| match i {
            staleguard::internal::transcript::Item::Call(c) if c.id == id => Some(c.clone()),
            _ => None,
        })
        .expect("call");
    assert!(verdict.is_allowed());
    // The same call on the same transcript up to it: allowed; on page 2: refused.
    let mut args: Value = serde_json::from_str(&call.arguments).expect("JSON");
    let upto = support::truncate(&body, call.message);
    assert!(verdict_after(&upto, &call.name, &args.to_string()).is_allowed());
    args["pageId"] = serde_json::json!(2);
    match verdict_after(&upto, &call.name, &args.to_string()) {
        staleguard::Verdict::Refuse { why, message } => {
            assert_eq!(why, staleguard::Refusal::NeedsSnapshot);
            assert!(message.contains("page 2"), "{message}");
        }
        other => panic!("uid on another page allowed: {other:?}"),
    }
    // list_pages naming page 1 selected, at the page's own URL: the uid stays actionable.
    args["pageId"] = serde_json::json!(1);
    let url = project(&upto)
        .report()
        .results
        .iter()
        .rev()
        .find_map(|r| r.url.clone())
        .expect("a page URL");
    let listed = extend(
        &upto,
        "list_pages",
        &format!("## Pages\n1: Page ({url}) [selected]"),
    );
    assert!(verdict_after(&listed, &call.name, &args.to_string()).is_allowed());
    let moved = extend(
        &upto,
        "list_pages",
        "## Pages\n1: Other (http://127.0.0.1:8431/index.html) [selected]",
    );
    assert!(!verdict_after(&moved, &call.name, &args.to_string()).is_allowed());
}

/// The OpenAI body with one more call of `name` and its result `text`.
fn extend(body: &str, name: &str, text: &str) -> String {
    let mut v: Value = serde_json::from_str(body).expect("JSON");
    let list = v["messages"].as_array_mut().expect("messages");
    list.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": name, "arguments": "{\"pageId\":1}"}}]}));
    list.push(serde_json::json!({"role": "tool", "tool_call_id": "call_x", "content": text}));
    v.to_string()
}
