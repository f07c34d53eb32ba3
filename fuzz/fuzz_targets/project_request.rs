//! Any bytes as a request body, in every format, with every stage on: never a panic, and a
//! projected body is always JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use staleguard::{Config, RequestFormat};
use staleguard_fuzz::check::is_json;

fuzz_target!(|data: &[u8]| {
    let Ok(body) = std::str::from_utf8(data) else {
        return;
    };
    let config = Config {
        browser_history_compaction: true,
        request_budget_bytes: Some(4096),
        ..Config::default()
    };
    for format in [
        RequestFormat::Auto,
        RequestFormat::OpenAiChat,
        RequestFormat::Anthropic,
        RequestFormat::Responses,
        RequestFormat::Gemini,
    ] {
        if let Ok(projected) =
            staleguard::project(body, format, &config, staleguard::Options::default())
        {
            assert!(is_json(&projected.body), "projection wrote invalid JSON");
        }
    }
});
