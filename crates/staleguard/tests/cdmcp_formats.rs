//! Chrome DevTools MCP 1.11.0 behind its data-format flags (`fixtures/cdmcp-1.11.0-json`,
//! `fixtures/cdmcp-1.11.0-toon`, recorded with `tests/record/record_cdmcp_formats.mjs`):
//! the snapshot as JSON in `structuredContent` (forwarded as the tool content by some
//! clients) and TOON-encoded under `## Latest page snapshot` read as the same observations
//! as the text form of the same step (`fixtures/cdmcp-1.11.0`): the same uids,
//! roles, names, URL, title and fingerprint nodes. Older snapshots collapse, the newest stays
//! byte for byte, and the guard refuses the stale uids the scenarios reuse.

mod support;

use serde_json::Value;
use staleguard::internal::observation::{self, cdmcp, TreeKind};
use staleguard::{RequestFormat, Status};
use support::formats::{chat_to_responses, check_any, project_as, result_slots};
use support::*;

/// The scenarios recorded with the data-format flags: three of the seven of
/// `fixtures/cdmcp-1.11.0` (this list stands in for support's `SCENARIOS` here).
const SCENARIOS: [&str; 3] = ["order", "order_inline", "rerender"];

/// A recording of the scenarios with one of the server's data formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// `--experimentalDataFormat=toon`: the text, with the snapshot in TOON.
    Toon,
    /// `--experimentalStructuredContent`, the tool content being `structuredContent` as JSON.
    Structured,
}

const VARIANTS: [Variant; 2] = [Variant::Toon, Variant::Structured];

fn recorded(variant: Variant, scenario: &str, wire: &str) -> String {
    let (dir, name) = match variant {
        Variant::Toon => ("cdmcp-1.11.0-toon", scenario.to_string()),
        Variant::Structured => ("cdmcp-1.11.0-json", format!("{scenario}_structured")),
    };
    read(&fixtures().join(format!("{dir}/{name}.{wire}.json")))
}

/// The text-format recording of the same scenario.
fn text_recording(scenario: &str) -> String {
    read(&fixtures().join(format!("cdmcp-1.11.0/{scenario}.openai.json")))
}

/// The body in each request format: OpenAI Chat and Anthropic as recorded, OpenAI
/// Responses converted from the Chat body.
fn bodies(variant: Variant, scenario: &str) -> [(RequestFormat, String); 3] {
    let chat = recorded(variant, scenario, "openai");
    [
        (RequestFormat::Responses, chat_to_responses(&chat)),
        (RequestFormat::OpenAiChat, chat),
        (
            RequestFormat::Anthropic,
            recorded(variant, scenario, "anthropic"),
        ),
    ]
}

/// Every tool result content of a body, in order (all are plain strings here).
fn result_texts(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).expect("JSON");
    result_slots(&v)
        .iter()
        .map(|s| match v.pointer(s) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect()
}

/// Our own oracle, independent of the detector: does the result carry a snapshot?
fn has_snapshot(variant: Variant, text: &str) -> bool {
    match variant {
        Variant::Toon => text
            .lines()
            .any(|l| l.trim_end() == "## Latest page snapshot"),
        Variant::Structured => serde_json::from_str::<Value>(text)
            .ok()
            .is_some_and(|v| v["snapshot"].is_object()),
    }
}

/// With `--experimentalStructuredContent` the text content is the default text: a client
/// that forwards the text shows the model exactly the text-format recording.
#[test]
fn structured_content_leaves_the_text_as_it_was() {
    for scenario in SCENARIOS {
        for wire in ["openai", "anthropic"] {
            let json = read(&fixtures().join(format!("cdmcp-1.11.0-json/{scenario}.{wire}.json")));
            let text = read(&fixtures().join(format!("cdmcp-1.11.0/{scenario}.{wire}.json")));
            assert!(json == text, "{scenario}.{wire}: text content changed");
        }
    }
}

#[test]
fn every_older_snapshot_collapses_and_the_newest_stays_byte_for_byte() {
    for variant in VARIANTS {
        for scenario in SCENARIOS {
            for (format, body) in bodies(variant, scenario) {
                let at = format!("{variant:?} {scenario} {format:?}");
                let p = project_as(&body, format);
                check_any(&body, &p, format);
                let texts = result_texts(&body);
                let results = &p.report().results;
                assert_eq!(
                    results.len(),
                    texts.len(),
                    "{at}: every tool is a browser tool"
                );
                let snapshots: Vec<usize> = (0..texts.len())
                    .filter(|&i| has_snapshot(variant, &texts[i]))
                    .collect();
                assert!(snapshots.len() >= 3, "{at}");
                let last = *snapshots.last().expect("a snapshot");
                for (i, r) in results.iter().enumerate() {
                    if i == last {
                        assert_eq!(r.status, Status::Live, "{at} result {i}");
                    } else if snapshots.contains(&i) {
                        assert_eq!(r.status, Status::Collapsed, "{at} result {i}");
                        assert_eq!(r.format, Some(cdmcp::NAME));
                        assert!(r.refs_withheld > 0 && r.url.is_some(), "{at}: {r:?}");
                    } else {
                        assert_ne!(r.status, Status::Collapsed, "{at}: {}", texts[i]);
                    }
                }
                // The newest snapshot: its own content is untouched (parts of ours may follow).
                let v: Value = serde_json::from_str(&body).expect("JSON");
                let out: Value = serde_json::from_str(&p.body).expect("JSON");
                let slot = &result_slots(&v)[last];
                let (before, after) = (&v.pointer(slot).unwrap(), out.pointer(slot).unwrap());
                match after {
                    Value::Array(parts) if !before.is_array() => {
                        assert_eq!(&parts[0]["text"], *before, "{at}")
                    }
                    _ => assert_eq!(after, *before, "{at}"),
                }
            }
        }
    }
}

/// The calls of a Chat body, in order: `(id, name)`.
fn calls(body: &str) -> Vec<(String, String)> {
    messages(body)
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["id"].as_str().unwrap_or("").to_string(),
                c["function"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Whitespace aside, as the server compares a parent's name with its text children.
fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Each result reads as the text form of the same step: kind, URL, title, tabs, action,
/// and for a snapshot the same nodes (fingerprint), chunks and controls, and the same refs,
/// except the text children the text form leaves out because their parent's name says
/// them, whose uids the data forms show.
#[test]
fn each_result_reads_as_the_text_form_of_the_same_step() {
    let mut compared = [0usize; 2];
    let mut hidden = 0;
    for variant in VARIANTS {
        for scenario in SCENARIOS {
            let (data_body, text_body) = (
                recorded(variant, scenario, "openai"),
                text_recording(scenario),
            );
            assert_eq!(
                calls(&data_body),
                calls(&text_body),
                "{variant:?} {scenario}: same steps"
            );
            let (data, text) = (result_texts(&data_body), result_texts(&text_body));
            for (i, (d, t)) in data.iter().zip(&text).enumerate() {
                let at = format!("{variant:?} {scenario} result {i}");
                let (dp, tp) = (observation::parse(d), observation::parse(t));
                let (Some(dp), Some(tp)) = (dp, tp) else {
                    assert!(
                        observation::parse(d).is_none() && observation::parse(t).is_none(),
                        "{at}: one form read, the other not:\n{d}\n{t}"
                    );
                    continue;
                };
                // The header parse tells what the full parse tells.
                let dh = observation::parse_header(d).expect("header");
                assert_eq!(
                    (
                        dh.format,
                        dh.kind,
                        dh.ref_count(),
                        &dh.url,
                        &dh.title,
                        &dh.action
                    ),
                    (
                        dp.format,
                        dp.kind,
                        dp.refs.len(),
                        &dp.url,
                        &dp.title,
                        &dp.action
                    ),
                    "{at}"
                );
                assert_eq!(
                    (
                        dp.format,
                        dp.kind,
                        &dp.url,
                        &dp.title,
                        &dp.tabs,
                        dp.lists_pages,
                        &dp.action
                    ),
                    (
                        tp.format,
                        tp.kind,
                        &tp.url,
                        &tp.title,
                        &tp.tabs,
                        tp.lists_pages,
                        &tp.action
                    ),
                    "{at}"
                );
                if tp.kind != TreeKind::Full {
                    compared[1] += 1;
                    continue;
                }
                compared[0] += 1;
                assert_eq!(dp.nodes, tp.nodes, "{at}: fingerprint nodes");
                assert_eq!(dp.chunks, tp.chunks, "{at}");
                assert_eq!(dp.table_ends, tp.table_ends, "{at}");
                assert_eq!(dp.controls, tp.controls, "{at}");
                assert!(dp.tree.is_some(), "{at}");
                // Refs: the text form's, in order, plus hidden text children.
                let (dr, tr) = (dp.ref_triples(), tp.ref_triples());
                let mut in_text = tr.iter().peekable();
                let mut parent = "";
                for r in &dr {
                    if in_text.peek() == Some(&r) {
                        parent = r.2;
                        in_text.next();
                        continue;
                    }
                    hidden += 1;
                    assert_eq!(r.1, "StaticText", "{at}: extra ref {r:?}");
                    assert!(cdmcp::is_uid(r.0), "{at}: {r:?}");
                    assert!(
                        squeeze(parent).contains(&squeeze(r.2)),
                        "{at}: {r:?} under {parent:?}"
                    );
                }
                assert!(in_text.next().is_none(), "{at}: text refs missing: {dr:?}");
            }
        }
    }
    assert!(compared[0] > 40 && compared[1] > 10, "{compared:?}");
    assert!(hidden > 20, "{hidden} hidden text children");
}

/// A `structuredContent` JSON as clients write it otherwise: pretty-printed with every
/// non-ASCII character escaped (Python's `json.dumps(..., indent=2)`).
fn python_style(json: &str) -> String {
    let v: Value = serde_json::from_str(json).expect("JSON");
    let pretty = serde_json::to_string_pretty(&v).expect("serialise");
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[test]
fn structured_content_reads_alike_however_it_is_written() {
    let mut checked = 0;
    for scenario in SCENARIOS {
        for text in result_texts(&recorded(Variant::Structured, scenario, "openai")) {
            let other = python_style(&text);
            let (a, b) = (observation::parse(&text), observation::parse(&other));
            assert_eq!(a.is_some(), b.is_some(), "{text}");
            let (Some(a), Some(b)) = (a, b) else { continue };
            assert_eq!(
                (
                    a.kind,
                    &a.url,
                    &a.title,
                    &a.tabs,
                    &a.action,
                    a.ref_triples()
                ),
                (
                    b.kind,
                    &b.url,
                    &b.title,
                    &b.tabs,
                    &b.action,
                    b.ref_triples()
                )
            );
            assert_eq!(
                (&a.nodes, &a.chunks, &a.controls),
                (&b.nodes, &b.chunks, &b.controls)
            );
            checked += 1;
        }
    }
    assert!(checked > 30, "{checked}");
}

/// The server's words for a uid it could not act on, in the text (`Error: Element uid "6_5"
/// not found on page 1.`) and in `structuredContent` (`{"errorMessage":"Element uid ..."}`).
fn server_rejected_as_stale(answer: &str) -> bool {
    answer.contains("not found on page") || answer.contains("no longer exists on the page")
}

/// As with the text format: the guard refuses every uid the server rejected as stale and
/// allows every uid that worked, but the repeated "Place order"; in all three request
/// formats, and the refusals say the same.
#[test]
fn the_guard_refuses_the_stale_uids_as_in_the_text_form() {
    for variant in VARIANTS {
        let (mut rejected, mut worked) = (0, 0);
        for scenario in SCENARIOS {
            for (format, body) in bodies(variant, scenario) {
                for (id, verdict, answer) in uid_calls(&body) {
                    let at = format!("{variant:?} {scenario} {format:?} {id}: {answer:.80}");
                    if server_rejected_as_stale(&answer) {
                        rejected += 1;
                        assert!(!verdict.is_allowed(), "stale uid allowed: {at}");
                        continue;
                    }
                    worked += 1;
                    if let staleguard::Verdict::Refuse { why, .. } = verdict {
                        assert_eq!(
                            why,
                            staleguard::Refusal::RepeatedSubmission,
                            "a uid that worked was refused: {at}"
                        );
                    }
                }
            }
        }
        // order call_13, order_inline call_10, rerender call_9; in three formats.
        assert_eq!(rejected, 9, "{variant:?}");
        assert!(worked > 30, "{variant:?}: {worked} uid calls that worked");

        let refusal = |scenario: &str, call: &str| {
            let body = recorded(variant, scenario, "openai");
            let (_, verdict, _) = uid_calls(&body)
                .into_iter()
                .find(|(id, _, _)| id == call)
                .expect("call recorded");
            match verdict {
                staleguard::Verdict::Refuse { why, message } => (why, message),
                other => panic!("{variant:?} {scenario} {call} allowed: {other:?}"),
            }
        };
        let (why, message) = refusal("order", "call_13");
        assert_eq!(why, staleguard::Refusal::NeedsSnapshot, "{variant:?}");
        assert!(message.contains("(take_snapshot)"), "{message}");
        let (why, message) = refusal("order_inline", "call_10");
        assert_eq!(why, staleguard::Refusal::StaleRef, "{variant:?}");
        assert!(message.contains("6_5"), "{message}");
        assert_eq!(
            refusal("rerender", "call_9").0,
            staleguard::Refusal::StaleRef
        );
    }
}

/// A real snapshot as `structuredContent` (order_inline call_9, shortened).
const DONE: &str = r#"{"message":"Successfully clicked on the element","navigatedToUrl":"http://127.0.0.1:8431/order/done.html","snapshot":{"id":"7_0","role":"RootWebArea","name":"Order placed","url":"http://127.0.0.1:8431/order/done.html","children":[{"id":"7_1","role":"heading","name":"Order placed","level":1},{"id":"7_4","role":"form","children":[{"id":"7_5","role":"button","name":"Cancel this order"}]}]}}"#;

/// JSON that merely mentions a snapshot or a uid is no observation: only this server's
/// `structuredContent` with a tree of uid nodes is.
#[test]
fn json_that_mentions_snapshots_or_uids_is_no_observation() {
    let obs = observation::parse(DONE).expect("the real one reads");
    assert_eq!((obs.kind, obs.refs.len()), (TreeKind::Full, 4));
    assert_eq!(obs.action.as_deref(), Some("Successfully clicked on the element\nPage navigated to http://127.0.0.1:8431/order/done.html."));
    for text in [
        r#"{"result":"Took a snapshot of the page"}"#,
        r#"{"snapshot":"uid=1_0 RootWebArea \"Order placed\"\n  uid=1_1 button \"Buy\""}"#,
        r#"{"message":"Clicked uid=4_5 in the latest snapshot","uid":"4_5"}"#,
        r#"{"uid":"4_5","role":"button","name":"Place order"}"#,
        r#"{"id":"4_5","role":"button","name":"Place order"}"#,
        r#"{"snapshot":{"id":"1_0"}}"#,
        r#"{"snapshot":{"id":"e1","role":"RootWebArea","name":"Shop"}}"#,
        r#"{"snapshot":{"uid":"1_0","role":"RootWebArea","name":"Shop"}}"#,
        r#"{"snapshot":{"id":"1_0","role":"RootWebArea","children":[{"id":"1_1","role":"button","children":"none"}]}}"#,
        r#"{"snapshot":{"id":"1_0","role":"RootWebArea","children":[{"role":"button","name":"Buy"}]}}"#,
        r#"{"snapshot":{"id":"1_0","role":"RootWebArea"},"notes":"also has other keys"}"#,
        r#"{"snapshot":{"id":"1_0","role":"RootWebArea"}"#,
        r#"[{"snapshot":{"id":"1_0","role":"RootWebArea"}}]"#,
        r#"{"type":"text","text":"snapshot uid=1_0"}"#,
        r#"{"errorMessage":"Element uid \"6_5\" not found on page 1."}"#,
        r#"{"message":"Successfully filled out the element"}"#,
        r#"{"snapshotFilePath":"/tmp/snapshot.txt"}"#,
        "## Latest page snapshot\nid: 1_0\nname: no role",
        "## Latest page snapshot\nThe snapshot of uid 1_2 is above.",
        "## Latest page snapshot\n{\"id\":\"1_0\",\"role\":\"RootWebArea\"}",
    ] {
        assert!(observation::parse(text).is_none(), "{text}");
        assert!(observation::parse_header(text).is_none(), "{text}");
    }
    // In a request: the real snapshot stays the live page; the near-misses after it are
    // neither observations nor collapsed.
    let body = chat_session(
        &[
            ("take_snapshot", DONE),
            ("evaluate_script", r#"{"snapshot":"taken","uid":"7_5"}"#),
            (
                "take_snapshot",
                r#"{"snapshot":{"id":"9_0","role":"RootWebArea"},"extra":1}"#,
            ),
        ],
        "What now?",
    );
    let p = project(&body);
    let statuses: Vec<Status> = p.report().results.iter().map(|r| r.status).collect();
    assert_eq!(statuses[0], Status::Live, "{statuses:?}");
    assert!(
        statuses[1..]
            .iter()
            .all(|s| *s != Status::Collapsed && *s != Status::Live),
        "{statuses:?}"
    );
}

/// Pages and navigations as `structuredContent` name the page as the text does.
#[test]
fn structured_page_reports() {
    let listed = observation::parse(
        r#"{"pages":[{"id":1,"url":"about:blank","title":"","selected":true}]}"#,
    )
    .expect("pages");
    assert_eq!(
        (
            listed.kind,
            listed.lists_pages,
            listed.url.as_deref(),
            listed.title
        ),
        (TreeKind::Report, true, Some("about:blank"), None)
    );
    let navigated = observation::parse(
        r#"{"message":"Successfully clicked on the element","navigatedToUrl":"http://x.test/a"}"#,
    )
    .expect("navigated");
    assert_eq!(
        (
            navigated.kind,
            navigated.url.as_deref(),
            navigated.lists_pages
        ),
        (TreeKind::Report, Some("http://x.test/a"), false)
    );
    let opened = observation::parse(r#"{"message":"Successfully clicked on the element","openedPages":[{"id":2,"url":"http://x.test/s","title":"Sheet","selected":false}]}"#)
        .expect("opened");
    assert_eq!((opened.tabs.len(), opened.current_tab()), (1, None));
    for bad in [
        r#"{"pages":[{"id":"1","url":"about:blank","title":"","selected":true}]}"#,
        r#"{"pages":[{"id":1,"url":"about:blank"}]}"#,
        r#"{"pages":[{"id":1,"url":"about:blank","title":"","selected":true,"owner":"me"}]}"#,
        r#"{"pages":[{"id":1}]}"#,
        r#"{"pages":{"id":1,"url":"about:blank"}}"#,
        r#"{"navigatedToUrl":5}"#,
    ] {
        assert!(observation::parse(bad).is_none(), "{bad}");
    }
}
