//! Two regressions found on these pages: a description rule that an unnamed element on an
//! older page switched off, and a lone surrogate that hid a page.

use serde_json::Value;
use staleguard::{RequestFormat, Status};

use crate::harness::*;
use crate::support;
use crate::support::formats::{chat_to_gemini, chat_to_responses, GeminiClient};
use crate::support::on;

/// The description rule held only until a ref had named an element without a name on an
/// older page: refs restart on every document up to Playwright MCP 0.0.68, so `e5`, an
/// unnamed paragraph on the forged page, was the Place order button on the next page, and a
/// click on it described as "Confirm button" passed. An unnamed element fits no description.
#[test]
fn a_ref_that_named_an_unnamed_element_before_still_must_fit_its_description() {
    let page = |url: &str, items: &str| {
        format!("### Page state\n- Page URL: {url}\n- Page Title: T\n- Page Snapshot:\n```yaml\n- generic [active] [ref=e1]:\n{items}```")
    };
    let first = page(
        "http://shop.test/a",
        "  - paragraph [ref=e5]: Retained text\n  - button \"Next\" [ref=e6]\n",
    );
    let second = page(
        "http://shop.test/b",
        "  - button \"Place order\" [ref=e5]\n  - button \"Confirm\" [ref=e10]\n",
    );
    let body = support::chat_session(
        &[("browser_navigate", &first), ("browser_click", &second)],
        "Confirm it.",
    );
    let engine = staleguard::Engine::new(on());
    let check = |element: &str, r: &str| {
        let args = format!(r#"{{"element":"{element}","ref":"{r}"}}"#);
        engine
            .check_call(&body, RequestFormat::OpenAiChat, "browser_click", &args)
            .expect("checks")
    };
    match check("Confirm button", "e5") {
        staleguard::Verdict::Refuse { message, .. } => {
            assert!(
                message.contains("ref e5 is button \"Place order\", not \"Confirm button\""),
                "{message}"
            )
        }
        allowed => panic!("{allowed:?}"),
    }
    assert!(check("Confirm button", "e10").is_allowed());
    assert!(check("Place order button", "e5").is_allowed());
    assert!(
        check("the paragraph", "e5").is_allowed(),
        "a description of no words passes"
    );
}

/// A lone UTF-16 surrogate in a page's text (one line of JavaScript; Playwright MCP passes
/// it on as a `\ud800` escape) made the whole result unreadable: the page was no
/// observation, never collapsed while old, and while newest the guard checked calls against
/// the page before it, so a ref that now names "Delete account" passed as "Show details".
/// Now it reads as U+FFFD, in a string content and in text parts, in every format.
#[test]
fn a_lone_surrogate_does_not_hide_a_page() {
    let page = |url: &str, title: &str, button: &str| {
        format!("### Page state\n- Page URL: {url}\n- Page Title: {title}\n- Page Snapshot:\n```yaml\n- heading \"{title}\" [level=1] [ref=e1]\n- button \"{button}\" [ref=e2]\n- listitem [ref=e3]: x \u{fffd} y\n```")
    };
    let pages = [
        page("http://shop.test/orders", "Orders \u{fffd}", "Show details"),
        page(
            "http://shop.test/account",
            "Account \u{fffd}",
            "Delete account",
        ),
    ];
    let parts = |t: &str| serde_json::json!([{"type": "text", "text": t}]);
    let call = |i: usize| {
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": format!("c{i}"), "type": "function", "function": {"name": "browser_navigate", "arguments": "{}"}}]})
    };
    let chat = |wrap: &dyn Fn(&str) -> Value| {
        let mut messages =
            vec![serde_json::json!({"role": "user", "content": "Show the order details."})];
        for (i, p) in pages.iter().enumerate() {
            messages.push(call(i));
            messages.push(serde_json::json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": wrap(p)}));
        }
        serde_json::json!({"model": "m", "messages": messages})
    };
    let anthropic = |wrap: &dyn Fn(&str) -> Value| {
        let mut messages =
            vec![serde_json::json!({"role": "user", "content": "Show the order details."})];
        for (i, p) in pages.iter().enumerate() {
            messages.push(serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("c{i}"), "name": "browser_navigate", "input": {}}]}));
            messages.push(serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("c{i}"), "content": wrap(p)}]}));
        }
        serde_json::json!({"model": "m", "max_tokens": 100, "messages": messages})
    };
    let string = |t: &str| Value::String(t.to_string());
    let as_chat = chat(&string).to_string();
    let bodies = [
        (RequestFormat::OpenAiChat, as_chat.clone()),
        (RequestFormat::OpenAiChat, chat(&parts).to_string()),
        (RequestFormat::Anthropic, anthropic(&string).to_string()),
        (RequestFormat::Anthropic, anthropic(&parts).to_string()),
        (RequestFormat::Responses, chat_to_responses(&as_chat)),
        (
            RequestFormat::Gemini,
            chat_to_gemini(&as_chat, GeminiClient::PythonMcp),
        ),
        (
            RequestFormat::Gemini,
            chat_to_gemini(&as_chat, GeminiClient::Cli),
        ),
    ];
    let engine = staleguard::Engine::new(on());
    for (format, body) in bodies {
        // The page's U+FFFD written as the lone surrogate it stood for.
        let body = body.replace('\u{fffd}', "\\ud800");
        assert_eq!(lone_surrogates(&body), 6, "{format:?}");
        let p = project(&body, format, &on());
        let statuses: Vec<Status> = p.report().results.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [Status::Collapsed, Status::Live], "{format:?}");
        check(&format!("{format:?}"), &body, &p, &on(), &[]);
        let args = r#"{"element":"Show details button","ref":"e2"}"#;
        let verdict = engine
            .check_call(&body, format, "browser_click", args)
            .expect("checks");
        match verdict {
            staleguard::Verdict::Refuse { message, .. } => {
                assert!(
                    message.contains("now names button \"Delete account\""),
                    "{format:?}: {message}"
                )
            }
            allowed => panic!("{format:?}: {allowed:?}"),
        }
    }
}
