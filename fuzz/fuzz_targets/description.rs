//! The description check (SPEC 5, "The description must fit the ref"): a call's `element`
//! words against the line its ref names. The input's lines are the element's role, its
//! name, the call's description, and optionally the name the same ref had on an earlier
//! page of the same URL and a byte that picks the call's shape (`browser_click`,
//! `browser_type`, a `browser_fill_form` field). The page is a Playwright MCP page holding
//! that element as ref `e2`.
//!
//! Asserts: never a panic; `Engine::check_call` and the verdict a projection gives the same
//! call at the end of the body agree; a description that is the element's name, or that
//! name with role and stop words around it, is never refused; with no earlier page, a
//! refusal for the description is symmetric (the name described by the description's words
//! is refused as well).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use staleguard::internal::observation;
use staleguard::{Engine, Options, Refusal, RequestFormat, Verdict};
use staleguard_fuzz::check::on;

/// A Playwright MCP page at `url` whose ref `e2` is `role "name"`.
fn page(url: &str, role: &str, name: &str) -> String {
    format!(
        "### Ran Playwright code\n```js\nawait page.goto('{url}');\n```\n### Page\n- Page URL: {url}\n- Page Title: Shop\n### Snapshot\n```yaml\n- generic [ref=e1]:\n  - heading \"Shop\" [level=1] [ref=e3]\n  - {role} \"{name}\" [ref=e2]\n  - link \"Home\" [ref=e4]\n```"
    )
}

/// A name as a page line can carry it verbatim: no quote, escape, bracket or control.
fn clean(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '"' | '\\' | '[' | ']') && !c.is_control())
        .collect::<String>()
        .trim()
        .to_string()
}

/// The call's arguments in the shape `shape` picks, describing ref `e2` as `said`.
fn arguments(shape: u8, said: &str) -> (&'static str, Value) {
    match shape % 3 {
        0 => ("browser_click", json!({"element": said, "ref": "e2"})),
        1 => (
            "browser_type",
            json!({"element": said, "ref": "e2", "text": "hello"}),
        ),
        _ => (
            "browser_fill_form",
            json!({"fields": [{"name": said, "type": "textbox", "ref": "e2", "value": "x"}]}),
        ),
    }
}

/// The verdict on the call, asked directly and as the last call of the body; they must agree.
fn verdict(engine: &Engine, messages: &[Value], shape: u8, said: &str) -> Verdict {
    let (tool, args) = arguments(shape, said);
    let body = json!({"model": "m", "messages": messages}).to_string();
    let asked = engine
        .check_call(&body, RequestFormat::OpenAiChat, tool, &args.to_string())
        .expect("the body reads");
    let mut with_call = messages.to_vec();
    with_call.push(json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": "proposed", "type": "function", "function": {"name": tool, "arguments": args.to_string()}}]}));
    let body = json!({"model": "m", "messages": with_call}).to_string();
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    let p = engine
        .project(&body, RequestFormat::OpenAiChat, options)
        .expect("the body projects");
    let last = p.verdicts.last().expect("a verdict on the proposed call");
    assert_eq!(
        last.verdict, asked,
        "check_call and the projection's verdict"
    );
    asked
}

fn session(role: &str, name: &str, earlier: Option<&str>) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": "do the task"})];
    let mut step = |n: usize, text: String| {
        let id = format!("call_{n}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "browser_navigate", "arguments": "{\"url\":\"http://shop.test/\"}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
    };
    if let Some(earlier) = earlier {
        step(1, page("http://shop.test/", role, earlier));
    }
    step(2, page("http://shop.test/", role, name));
    messages
}

fn by_description(v: &Verdict) -> bool {
    matches!(
        v,
        Verdict::Refuse {
            why: Refusal::ReusedRef,
            ..
        }
    )
}

fuzz_target!(|text: &str| {
    let mut lines = text.split('\n');
    let role: String = lines
        .next()
        .unwrap_or("")
        .chars()
        .filter(char::is_ascii_lowercase)
        .take(20)
        .collect();
    let role = if role.is_empty() {
        "button".to_string()
    } else {
        role
    };
    let name = clean(lines.next().unwrap_or(""));
    let said = lines.next().unwrap_or("").to_string();
    let earlier = lines.next().map(clean).filter(|e| !e.is_empty());
    let shape = lines.next().and_then(|l| l.bytes().next()).unwrap_or(0);
    let engine = Engine::new(on());
    let messages = session(&role, &name, earlier.as_deref());
    let v = verdict(&engine, &messages, shape, &said);

    // The properties below hold for a name the page carries as it is. An element without a
    // name is described by nothing: a description that fits an earlier name is refused.
    if name.is_empty() || carried(&role, &name) != Some(name.clone()) {
        return;
    }
    let mut fitting = vec![name.clone(), format!("the {name} {role}")];
    let upper = name.to_uppercase();
    if upper.to_lowercase() == name.to_lowercase() {
        fitting.push(upper);
    }
    for fits in fitting {
        let v = verdict(&engine, &messages, shape, &fits);
        assert!(
            !by_description(&v),
            "{fits:?} refused for {role} {name:?}: {v:?}"
        );
    }
    let swapped = clean(&said);
    if earlier.is_none() && swapped == said && carried(&role, &said) == Some(said.clone()) {
        let messages = session(&role, &said, None);
        let back = verdict(&engine, &messages, shape, &name);
        assert_eq!(
            by_description(&v),
            by_description(&back),
            "{said:?} for {name:?}: {v:?}; {name:?} for {said:?}: {back:?}"
        );
    }
});

/// The name the page's parser reads for ref `e2` of a page that writes `role "name"`.
fn carried(role: &str, name: &str) -> Option<String> {
    let text = page("http://shop.test/", role, name);
    let obs = observation::parse(&text)?;
    let element = obs.refs.iter().find(|r| r.id == "e2")?;
    (element.role == role).then(|| element.name.to_string())
}
