//! Gemini `generateContent` bodies built from a session script (`staleguard_fuzz::script`:
//! the seeds are the recorded sessions), in every client's shape: Gemini CLI, `google-genai`
//! with MCP, ids on both sides, the `@google/genai` MCP adapter; the Code Assist wrapper,
//! snake_case keys, `cachedContent`. Never a panic; the body is read as Gemini; only result
//! values change, a collapsed one to a receipt with no ref in it; projecting again changes
//! nothing; and the same session as an OpenAI Chat body collapses the same observations,
//! keeps the same evidence and has the guard say the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard::{Options, RequestFormat};
use staleguard_fuzz::check::{check_any, on, same_as_chat};
use staleguard_fuzz::script::Script;

fuzz_target!(|text: &str| {
    let script = Script::parse(text);
    let body = script.gemini().to_string();
    let config = on();
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    if script.steps.is_empty() {
        // `contents: []` is no request: it need not even read (inside a Code Assist wrapper).
        let _ = staleguard::project(&body, RequestFormat::Gemini, &config, options);
        return;
    }
    let p = staleguard::project(&body, RequestFormat::Gemini, &config, options)
        .expect("a Gemini body projects");
    assert_eq!(p.breakpoint, None, "Gemini has no breakpoints");
    check_any(&body, &p, RequestFormat::Gemini, &config);
    let auto = staleguard::project(&body, RequestFormat::Auto, &config, options)
        .expect("projects as Auto");
    assert_eq!(
        auto.format,
        RequestFormat::Gemini,
        "read as {:?}",
        auto.format
    );
    assert_eq!(auto.body, p.body, "Auto and Gemini alike");

    // Gemini CLI escapes its own closing tag inside a result: that text is another.
    let escaped = script
        .calls()
        .any(|(_, c)| c.result.contains("untrusted_context"));
    if escaped {
        return;
    }
    same_as_chat(&p, &script, &config, options);
});
