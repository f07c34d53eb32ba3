//! OpenAI Responses bodies built from a session script (`staleguard_fuzz::script`: the
//! seeds are the recorded sessions), in Codex's shapes and the others: namespaced calls,
//! outputs as text or `input_text` parts, `custom_tool_call`s, reasoning items,
//! `previous_response_id`, a `tool_search_output` that loads `browser_history`. Never a
//! panic; the body is read as Responses; only result outputs change, a collapsed one to a
//! receipt with no ref in it; projecting again changes nothing; and the same session as an
//! OpenAI Chat body collapses the same observations, keeps the same evidence and has the
//! guard say the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard::{Options, RequestFormat};
use staleguard_fuzz::check::{check_any, on, same_as_chat};
use staleguard_fuzz::script::Script;

fuzz_target!(|text: &str| {
    let script = Script::parse(text);
    let body = script.responses().to_string();
    let config = on();
    let options = Options {
        verdicts: true,
        ..Options::default()
    };
    let p = staleguard::project(&body, RequestFormat::Auto, &config, options)
        .expect("a Responses body projects");
    assert_eq!(p.format, RequestFormat::Responses, "read as {:?}", p.format);
    assert_eq!(p.breakpoint, None, "Responses has no breakpoints");
    check_any(&body, &p, RequestFormat::Responses, &config);
    let named = staleguard::project(&body, RequestFormat::Responses, &config, options)
        .expect("projects as Responses");
    assert_eq!(named.body, p.body, "Auto and Responses alike");

    // A tool search that loads `browser_history` puts the guard in front: a collapse may
    // wait there, and not in a Chat body that offers no such tool.
    if script.flag(2) & 32 != 0 {
        return;
    }
    same_as_chat(&p, &script, &config, options);
});
