//! Any Unicode around a URL, in any text the projection reads, projects without a panic
//! (issue 41: `打开https://...` in a user message panicked in the evidence ranking, which
//! reads the user's and the model's words, the calls' arguments and the pages).

mod support;

use proptest::prelude::*;
use serde_json::{json, Value};
use staleguard::{Config, Engine, LivePage, Options, RequestFormat};
use support::formats::chat_to_anthropic;
use support::*;

/// Texts writers put right against a URL or a word: scripts written without spaces, right to
/// left, combining marks, joiners, symbols and emoji of 2, 3 and 4 bytes.
const SCRIPTS: &[&str] = &[
    "打开",
    "然后订购三个红色小部件。",
    "ページを開いて",
    "ދިވެހި",
    "انظر",
    "עברית",
    "हिन्दी",
    "→",
    "👉",
    "👩‍👩‍👧",
    "🇯🇵",
    "e\u{301}",
    "\u{200b}",
    "\u{200d}",
    "\u{202e}",
    "ｈｔｔｐｓ：／／",
    "ß",
    "\u{feff}",
];

/// A piece of text: a few of the scripts above and arbitrary characters, in any order.
fn piece() -> impl Strategy<Value = String> {
    let one = prop_oneof![
        3 => prop::sample::select(SCRIPTS).prop_map(str::to_string),
        1 => any::<char>().prop_map(String::from),
    ];
    prop::collection::vec(one, 0..4).prop_map(|parts| parts.concat())
}

/// `pre` + a URL + `post`, with no space between: how the text of issue 41 was written.
fn around_url() -> impl Strategy<Value = String> {
    let url = prop::sample::select(
        &[
            "https://shop.example.com",
            "http://127.0.0.1:8431/order/",
            "file:///tmp/page.yml",
            "https://例え.jp/パス?q=値#節",
            "://",
            "https:",
        ][..],
    );
    (piece(), url, piece()).prop_map(|(pre, url, post)| format!("{pre}{url}{post}"))
}

/// Where the text goes: every context the projection reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    System,
    User,
    Question,
    Assistant,
    Arguments,
    Page,
    Title,
}

fn context() -> impl Strategy<Value = Context> {
    prop::sample::select(
        &[
            Context::System,
            Context::User,
            Context::Question,
            Context::Assistant,
            Context::Arguments,
            Context::Page,
            Context::Title,
        ][..],
    )
}

/// A Playwright MCP 0.0.41 page of `bytes` bytes, with `text` in its first paragraph and, in
/// `title`, in its title and URL.
fn page(n: usize, text: &str, title: &str, bytes: usize) -> String {
    let url = format!("http://127.0.0.1:8431/p{n}.html?q={title}");
    playwright_page(&url, &format!("Page {n} {title}"), bytes, |i| match i {
        2 => format!("\"{text} costs $19.99, order {n}\""),
        _ => format!("Line {i} of page {n}: widget {i} costs ${i}.50"),
    })
}

/// An OpenAI Chat session with `text` in `context`: three pages (the last one large enough
/// to go lean), the model's words between them, and a question at the end.
fn session(context: Context, text: &str) -> String {
    let at = |c: Context| if c == context { text } else { "" };
    let pages = [
        page(1, at(Context::Page), at(Context::Title), 600),
        page(2, at(Context::Page), at(Context::Title), 3_000),
        page(3, at(Context::Page), at(Context::Title), 9_000),
    ];
    let arguments = [
        json!({"url": format!("https://shop.example.com/{}", at(Context::Arguments))}),
        json!({"element": format!("Go {} button", at(Context::Arguments)), "ref": "e1"}),
        json!({"element": "Go", "ref": "e1", "text": at(Context::Arguments)}),
    ];
    let names = ["browser_navigate", "browser_click", "browser_type"];
    let mut messages = vec![
        json!({"role": "system", "content": format!("You drive a browser. {}", at(Context::System))}),
        json!({"role": "user", "content": format!("Open the shop {} and order three red widgets.", at(Context::User))}),
    ];
    for (i, page) in pages.iter().enumerate() {
        let id = format!("call_{i}");
        let said = format!("I see {} on the page.", at(Context::Assistant));
        messages.push(
            json!({"role": "assistant", "content": said, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": names[i], "arguments": arguments[i].to_string()}}]}),
        );
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": page}));
    }
    let question = format!("What did page 1 say {}?", at(Context::Question));
    messages.push(json!({"role": "user", "content": question}));
    json!({"model": "gpt-4.1", "messages": messages}).to_string()
}

fn engines() -> Vec<Engine> {
    let mut lean = on();
    lean.live_page = LivePage::Lean;
    let behind_guard = Config {
        guard_in_front: Some(true),
        request_budget_bytes: Some(4_000),
        ..on()
    };
    [on(), lean, behind_guard].map(Engine::new).into()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn any_unicode_around_a_url_in_any_context_projects(
        context in context(),
        text in around_url(),
    ) {
        let chat = session(context, &text);
        let bodies = [
            (RequestFormat::OpenAiChat, chat.clone()),
            (RequestFormat::Anthropic, chat_to_anthropic(&chat)),
        ];
        for engine in engines() {
            for (format, body) in &bodies {
                let p = engine.project(body, *format, Options::default());
                let p = p.map_err(|e| TestCaseError::fail(format!("{format:?}: {e}")))?;
                prop_assert!(serde_json::from_str::<Value>(&p.body).is_ok());
                // Two of three pages are old: they collapse whatever their text.
                prop_assert!(p.collapsed() >= 2, "{format:?}: {} collapsed", p.collapsed());
                let again = engine.project(&p.body, *format, Options::default());
                prop_assert_eq!(again.map(|a| a.body).ok(), Some(p.body.clone()));
            }
            // The guard reads the same texts, and the call's own words.
            let arguments = json!({"element": text, "ref": "e1"}).to_string();
            let verdict = engine.check_call(&chat, RequestFormat::OpenAiChat, "browser_click", &arguments);
            prop_assert!(verdict.is_ok());
        }
        // The whole SPEC 2 check on the Chat body under the defaults.
        check_invariants(&chat, &project(&chat));
    }
}

/// The body of issue 41, as written: it projects, and the page it asks about still collapses.
#[test]
fn the_body_of_issue_41_projects() {
    let text = "打开https://shop.example.com 然后订购三个红色小部件。";
    for context in [
        Context::User,
        Context::Question,
        Context::Assistant,
        Context::Arguments,
    ] {
        let chat = session(context, text);
        let p = project(&chat);
        assert!(p.collapsed() >= 2, "{context:?}");
        check_invariants(&chat, &p);
    }
}

/// The recorded order session (Playwright MCP 0.0.41) with its task written as issue 41's
/// user wrote: Chinese right against the URL. It projects in both wire formats, as the same
/// session in English does but for the words of the task.
#[test]
fn the_recorded_order_with_a_chinese_task_projects() {
    for (name, format) in [
        ("order_zh.openai.json", RequestFormat::OpenAiChat),
        ("order_zh.anthropic.json", RequestFormat::Anthropic),
    ] {
        let body = read(&fixtures().join("unicode").join(name));
        assert!(
            body.contains("打开http://127.0.0.1:8431/order/form.html"),
            "{name}"
        );
        let p = project_on(&body, format).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(p.collapsed() >= 3, "{name}: {} collapsed", p.collapsed());
        if format == RequestFormat::OpenAiChat {
            check_invariants(&body, &p);
        }
    }
}
