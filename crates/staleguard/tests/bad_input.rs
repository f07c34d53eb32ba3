//! SPEC 8: bad input gives a typed error and never a panic; structural oddities are left
//! as they are while the rest is still projected.

mod support;

use proptest::prelude::*;
use staleguard::{Error, RequestFormat, Status};
use support::*;

const TREE: &str = "### Page\\n- Page URL: http://a.test/\\n- Page Title: A\\n### Snapshot\\n```yaml\\n- button \\\"Go\\\" [ref=e1]\\n```";

fn session(extra: &str) -> String {
    format!(
        r#"{{"model":"m","messages":[{extra}
        {{"role":"assistant","content":null,"tool_calls":[{{"id":"c1","type":"function","function":{{"name":"browser_snapshot","arguments":"{{}}"}}}}]}},
        {{"role":"tool","tool_call_id":"c1","content":"{TREE}"}},
        {{"role":"assistant","content":null,"tool_calls":[{{"id":"c2","type":"function","function":{{"name":"browser_snapshot","arguments":"{{}}"}}}}]}},
        {{"role":"tool","tool_call_id":"c2","content":"{TREE} "}}]}}"#
    )
}

#[test]
fn invalid_json_names_line_column_and_offset() {
    let body = "{\"messages\": [\n  {\"role\": \"user\",, }\n]}";
    let err = project_on(body, RequestFormat::Auto).unwrap_err();
    match &err {
        Error::Json {
            line,
            column,
            offset,
            ..
        } => {
            assert_eq!((*line, *column), (2, 19));
            assert_eq!(&body[*offset..*offset + 1], ",");
        }
        other => panic!("expected a JSON error, got {other:?}"),
    }
    assert!(err.to_string().contains("line 2, column 19"), "{err}");
}

#[test]
fn wrong_shapes_are_clear_errors() {
    for body in ["[]", "3", "{}", "{\"model\":\"x\"}"] {
        let err = project_on(body, RequestFormat::Auto).unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{body}: {err:?}");
    }
    // A format named on the command line must fit the body.
    let err = staleguard::project(
        "{\"model\":\"x\",\"messages\":[]}",
        RequestFormat::Responses,
        &on(),
        staleguard::Options::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("no `input`"), "{err}");
    let err = project_on("{\"input\":[]}", RequestFormat::Anthropic).unwrap_err();
    assert!(err.to_string().contains("no `messages`"), "{err}");
    assert!("yaml"
        .parse::<RequestFormat>()
        .unwrap_err()
        .contains("auto, openai, anthropic, responses"));
}

#[test]
fn oddities_are_kept_and_the_rest_projected() {
    let oddities = r#"null, 3, "text", [1,2], {"role": 7}, {"role":"wizard","content":"hi"},
        {"role":"tool","tool_call_id":"nobody","content":"orphan"},
        {"role":"tool","tool_call_id":"c0","content":{"weird":true}},
        {"role":"user","content":[{"type":"text","text":"x"}]},"#;
    let body = session(oddities);
    let p = project(&body);
    assert_eq!(p.report().collapsed(), 1);
    check_invariants(&body, &p);
    let statuses: Vec<_> = p.report().results.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![Status::Collapsed, Status::Live]);
}

#[test]
fn an_explicit_call_projects_whatever_the_hosts_switch_says() {
    // `browser_history_compaction` is off by default; it is the proxy's and the MCP guard's
    // switch. The library call itself is the opt-in.
    let body = session("");
    let p = staleguard::project(
        &body,
        RequestFormat::Auto,
        &staleguard::Config::default(),
        staleguard::Options::default(),
    )
    .unwrap();
    assert_ne!(p.body, body);
    assert_eq!(p.report().collapsed(), 1);
    assert_eq!(p.report().results.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn never_panics_on_arbitrary_bytes(s in ".{0,300}") {
        let _ = project_on(&s, RequestFormat::Auto);
    }

    #[test]
    fn never_panics_on_damaged_sessions(cut in 0usize..2000, junk in ".{0,8}") {
        let body = session("");
        let mut at = cut.min(body.len());
        while !body.is_char_boundary(at) { at -= 1; }
        let damaged = format!("{}{}{}", &body[..at], junk, &body[at..]);
        if let Ok(p) = project_on(&damaged, RequestFormat::Auto) {
            prop_assert!(serde_json::from_str::<serde_json::Value>(&p.body).is_ok());
        }
    }
}
